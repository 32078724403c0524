"""Placement on Kafka partitions, and decisions that fit: what ``decide`` checks last (pure).

**Placement.** On the Kafka runtime a graph lives on one partition of the commands topic, the
one an admin placed it on (``claimgraph kafka place``). That step writes a ``place`` record
into the partition itself, so the governor learns the placement from the log it decides and
replay sees it at the same position: an accepted ``place`` (only in the partition it names)
sets ``GraphState.placed``. Under rules revision 2 a command of a graph that is not placed on
the partition its record is in is rejected as ``misrouted`` — whatever partitioner its
producer used, and whatever its record's key. A record whose Kafka key is missing or is not a
graph name is decided in a bucket graph (:data:`UNKEYED`, :data:`BAD_KEY`) that is never
placed, so it gets a rejection that names the key's problem. Revision-1 graphs (written before
placement existed) keep being decided unplaced; ``kafka place`` adopts them where they are.

**The operator.** Under rules revision 6 a ``place`` is accepted only from the operator the
governor is configured with (``operator``, a fact of the deployment like the partition, never
read from a topic producers can write); anyone else's is rejected ``not_operator``.

**No per-key state.** Under revision 6 a record whose key is not a graph already decided on the
partition is decided in a fresh state first; unless that decision accepts it (an operator's
``place`` of the graph), the rejection is recorded in one shared bucket (:data:`UNPLACED`,
:func:`route`) with its command id forgotten — 100,000 distinct junk keys leave one bucket
whose state does not grow, where revisions 2 to 5 made each key a graph of its own.

**Size.** Under rules revision 2 a decision whose record would exceed
``LIMITS["decision_bytes"]`` is replaced by a ``rejected``/``too_large`` decision that keeps
its envelope (ids bounded), carries no effect and still links the hash chain: a command whose
decision cannot be written is recorded, never retried forever.
"""

from __future__ import annotations

from collections.abc import Callable, Container, MutableMapping
from typing import cast

from claimgraph.core.governor.base import Refusal
from claimgraph.core.governor.revisions import at_least
from claimgraph.core.model import LIMITS, Command, Decision, PlaceCommand, Reason
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_decision

__all__ = [
    "BAD_KEY",
    "UNKEYED",
    "UNPLACED",
    "Decide",
    "fitting",
    "graph_of",
    "place",
    "placed_here",
    "replaced",
    "route",
    "valid_graph_name",
]

UNKEYED = "_unkeyed"  # the graph records without a key are decided in
BAD_KEY = "_bad_key"  # ... and records whose key is not a graph name (never placed)
UNPLACED = "_unplaced"  # revision 6: the one bucket of every record of no graph here

Decide = Callable[..., Decision]
"""``decide(state, data, input_offset, log_time, *, rules, partition, operator)``."""


def valid_graph_name(name: str) -> bool:
    """A name a graph may be placed under: 1-256 printable characters, not starting with ``_``
    (names with ``_`` are the buckets of records whose key names no graph)."""
    return 0 < len(name) <= LIMITS["id"] and name.isprintable() and not name.startswith("_")


def place(state: GraphState, cmd: Command, d: Decision) -> None:
    """Accept a placement; :func:`placed_here` rejects it unless it is in the partition it names."""
    c = cast(PlaceCommand, cmd)
    p = c["partition"]
    if not isinstance(p, int) or isinstance(p, bool) or p < 0:
        raise Refusal(Reason.INVALID_FIELD, f"partition must be a partition number, got {p!r}")
    if not valid_graph_name(state.graph):
        raise Refusal(Reason.INVALID_ID, f"{state.graph[:80]!r} is not a graph name to place")
    d["kind"] = "accepted"
    d["reason"] = Reason.PLACED.value
    d["count"] = p
    again = " (again)" if state.placed == p else ""
    d["detail"] = f"graph {state.graph!r} is placed on partition {p}{again}"


def placed_here(
    state: GraphState, d: Decision, partition: int | None, operator: str | None = None
) -> Decision:
    """``d``, or a ``misrouted`` (or ``not_operator``) rejection in its place.

    ``partition`` is the commands partition the record is in (None: the embedded log, which
    places nothing). A ``place`` must be in the partition it names, under every revision (the
    record type is newer than revision 1), and under revision 6 come from ``operator`` (None:
    no operator is configured, so no place is accepted). Under revision 2 — read from the
    graph, not from ``d``, so that the ``upgrade_rules`` decision moving a graph to 2 is still
    judged under 1 — any other command of a graph not placed on ``partition`` is misrouted.
    """
    if d["command_type"] == "place":
        if d["kind"] == "accepted" and d["count"] != partition:
            where = "outside the Kafka runtime" if partition is None else f"in {partition}"
            why = f"this place record names partition {d['count']} but is {where}"
            return replaced(d, Reason.MISROUTED, why)
        if d["kind"] == "accepted" and at_least(d, 6) and d["agent"] != operator:
            who = "no operator is configured" if operator is None else f"it is {operator!r}"
            why = (
                f"only the operator places a graph: {d['agent'][:80]!r} asked to place graph "
                f"{state.graph!r} on partition {d['count']}, and {who} (the governor's "
                "--operator)"
            )
            return replaced(d, Reason.NOT_OPERATOR, why)
        return d
    in_force = d["rules"] if state.rules is None else state.rules
    if partition is None or in_force < 2 or state.placed == partition:
        return d
    if state.graph == UNKEYED:
        why = "the record has no key; a command's key is the name of its graph"
    elif state.graph == BAD_KEY:
        why = (
            "the record's key is not a graph name (UTF-8, 1-256 printable characters, "
            "not starting with '_')"
        )
    else:
        why = (
            f"graph {state.graph!r} is not placed on partition {partition} "
            f"(claimgraph kafka place puts a graph on one partition; writers produce there)"
        )
    return replaced(d, Reason.MISROUTED, why)


def graph_of(key: bytes | None, known: Container[str]) -> str:
    """The graph a commands record is decided in: its key, when the key is a graph name.

    A record without a key is decided in :data:`UNKEYED`, one whose key is not a graph name
    (not UTF-8, too long, control characters, a leading ``_``) in :data:`BAD_KEY`; neither
    bucket is ever placed, so under rules revision 2 both get a rejection saying why, and
    a 600 KB key never becomes a graph, a decision's key or a stalled partition. ``known``
    are the graphs decided before in this partition: a key decided as a graph before keys
    were checked stays that graph, so old logs replay as they were written. (Under revision
    6, :func:`route` decides a graph not in ``known`` in :data:`UNPLACED` unless it is placed.)
    """
    if not key:
        return UNKEYED
    try:
        name = key.decode("utf-8")
    except UnicodeDecodeError:
        name = None
    if name is not None and (valid_graph_name(name) or name in known):
        return name
    legacy = key.decode("utf-8", "replace")
    return legacy if legacy in known else BAD_KEY


def route(
    states: MutableMapping[str, GraphState],
    key: bytes | None,
    data: bytes,
    input_offset: int,
    log_time: int,
    decide: Decide,
    *,
    partition: int,
    operator: str | None,
    rules: int | None = None,
) -> tuple[str, Decision]:
    """Decide one commands record of a Kafka partition in the graph its key names: the graph
    it was decided in, and its decision (not folded: the caller folds it into
    ``states[graph]``, which exists on return).

    A key with a state in ``states`` is decided there. Otherwise the record is decided in a
    fresh state of its graph; if that decision accepts it, or is made under a revision before
    6, the fresh state becomes the graph's (as every key did before revision 6). Else the
    rejection is recorded in :data:`UNPLACED`: the same verdict and detail, the bucket's hash
    chain, no command id — nothing of the key or the command stays in any state. The live
    governor and ``verify`` route by this one function (``verify`` with the logged ``rules``).
    """
    graph = graph_of(key, states)
    st = states.get(graph)
    if st is not None:
        return graph, decide(
            st, data, input_offset, log_time, rules=rules, partition=partition, operator=operator
        )
    fresh = GraphState(graph)
    d = decide(
        fresh, data, input_offset, log_time, rules=rules, partition=partition, operator=operator
    )
    if d["kind"] != "rejected" or not at_least(d, 6):
        fresh.offsets = []
        states[graph] = fresh
        return graph, d
    bucket = states.get(UNPLACED)
    if bucket is None:
        bucket = states[UNPLACED] = GraphState(UNPLACED)  # no offsets: it accepts nothing
    return UNPLACED, unplaced(d, bucket)


def unplaced(d: Decision, bucket: GraphState) -> Decision:
    """A rejection made in a fresh state, recorded in the bucket ``bucket`` instead."""
    out = cast(
        Decision, {**d, "graph": bucket.graph, "command_id": "", "schema_rev": bucket.schema_rev}
    )
    out["prev_hash"] = bucket.chain.hex()
    return out


def fitting(d: Decision, data_len: int) -> Decision:
    """``d``, or a ``too_large`` rejection in its place when its record would not fit.

    ``data_len`` is the size of the command record: a decision echoes the command's fields a
    few times at most, so a cheap bound settles nearly every decision without encoding it.
    """
    limit = LIMITS["decision_bytes"]
    if _bound(d, data_len) <= limit:
        return d
    n = len(encode_decision(d))
    if n <= limit:
        return d
    return replaced(
        d,
        Reason.TOO_LARGE,
        f"its decision would take {n} bytes, over the {limit}-byte bound of one decision: "
        f"rejected without effect (it would have been {d['kind']} {d['reason'][:40]})",
    )


def _bound(d: Decision, data_len: int) -> int:
    """An upper bound of the encoded size of ``d``.

    What a decision copies from its command (envelope, claim, schema, grant, key) is at most
    four times the command's bytes; what it takes from the state are checked ids (at most
    259 characters, 4 bytes each in UTF-8): a target, a conflict, a key id and the lists; a
    merge's outcome is a polarity and an object (at most 520 characters).
    """
    n = 4 * data_len + 4 * (len(d["detail"]) + len(d["graph"])) + 4096
    lists = (d["conflicts_with"], d["supersedes"], d["withheld"], d["released"], d["dismissed"])
    n += 1050 * sum(len(ids) for ids in lists)
    if d["merge"] is not None:
        n += 3200 + 4200 * len(d["merge"]["contributions"])
    for s in d["signals"]:
        n += 1050 * (len(s["claims"]) + 1) + 4 * len(s["detail"])
    for x in d["exits"]:
        n += 1100 + 4 * len(x["detail"])
    return n


def replaced(d: Decision, reason: Reason, detail: str) -> Decision:
    """A rejection in place of ``d``: its envelope (ids bounded), no effects, the chain fields
    and the rules revision unchanged."""
    out = cast(
        Decision,
        {
            **d,
            "kind": "rejected",
            "reason": reason.value,
            "detail": detail[: LIMITS["detail"]],
            "claim": None,
            "target": None,
            "conflict_id": None,
            "conflicts_with": [],
            "supersedes": [],
            "withheld": [],
            "released": [],
            "dismissed": [],
            "stale": False,
            "schema": None,
            "grant": None,
            "merge": None,
            "signals": [],
            "exits": [],
            "count": 0,
            "run_id": None,
            "key": None,
        },
    )
    if len(d["command_id"]) > LIMITS["id"]:
        out["command_id"] = ""  # an unusable id is not remembered
    for k in ("command_type", "agent", "task"):
        out[k] = _bounded(d[k])
    if d["signed_by"] is not None:
        out["signed_by"] = _bounded(d["signed_by"])
    return out


def _bounded(s: str) -> str:
    return s if len(s) <= LIMITS["id"] else s[: LIMITS["id"] - 1] + "…"
