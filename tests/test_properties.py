"""Property tests of the core: replay, reads at a version, authority, one decision per command,
and the invariants the governor keeps at every version.

The streams (``tests/strategies.py``) are random but make conflicts likely; reads through the
RocksDB projection are compared with a reference fold written without ``claimgraph.core.state``
(``tests/reference.py``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rocksdict import WriteBatch

from claimgraph.core.governor import decide
from claimgraph.core.model import Decision
from claimgraph.core.state import GraphState
from claimgraph.core.wire import decode_decision, encode_decision
from claimgraph.errors import InputError, UnknownSlotError
from claimgraph.service.graph import Graph, open_graph

from .reference import (
    EXCLUSIVE_OBJECT,
    EXCLUSIVE_SUBJECT,
    Authority,
    Edge,
    Slot,
    View,
    fold,
    schema_info,
    slots_of,
)
from .strategies import GRAPH, Stream, claim, publish, resolve, retract, stream_of, streams


def examples(n: int) -> settings:
    """Settings for a property: ``n`` examples (each takes a few ms to ~50 ms), no deadline."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def decide_all(records: Sequence[bytes], times: Sequence[int]) -> list[Decision]:
    """Decide every record from a fresh state with the pure core (decision i is version i)."""
    state = GraphState(GRAPH)
    out = []
    for i, (record, now) in enumerate(zip(records, times, strict=True)):
        d = decide(state, record, i, now)
        state.evolve(d, i)
        out.append(d)
    return out


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory, in RAM when the machine has /dev/shm: the graphs are tiny, and
    without fsync to a disk an example runs ~10x faster, which is what shrinking needs."""
    ram = "/dev/shm"
    usable = os.path.isdir(ram) and os.access(ram, os.W_OK)
    return tempfile.TemporaryDirectory(prefix="claimgraph-props-", dir=ram if usable else None)


def write_commands(graph: Graph, records: Sequence[bytes], times: Sequence[int]) -> None:
    """Append records to the commands log with the given log times (the governor's now)."""
    wb = WriteBatch(raw_mode=True)
    graph.logs.commands.stage(wb, list(records), timestamps=list(times))
    graph.logs.write(wb)


def logged_decisions(graph: Graph) -> list[Decision]:
    """The decisions log, whose offsets must be dense here (the embedded log has no gaps)."""
    records = graph.logs.decisions.read(0, graph.logs.decisions.end() + 1)
    assert [r.offset for r in records] == list(range(len(records)))
    return [decode_decision(r.value) for r in records]


@contextmanager
def graph_after(stream: Stream, batch: int, reopen_at: int | None) -> Iterator[Graph]:
    """An embedded graph that decided ``stream``, closed and reopened after ``reopen_at``."""
    with scratch() as tmp:
        graph = open_graph(tmp, create=True, graph=GRAPH)
        try:
            if reopen_at is not None:
                write_commands(graph, stream.records[:reopen_at], stream.times[:reopen_at])
                graph.process(batch)
                graph.close()
                graph = open_graph(tmp)
                write_commands(graph, stream.records[reopen_at:], stream.times[reopen_at:])
            else:
                write_commands(graph, stream.records, stream.times)
            graph.process(batch)
            yield graph
        finally:
            graph.close()


# -- 1. replay determinism --------------------------------------------------------------------


@examples(150)
@given(streams())
def test_replay_is_byte_for_byte_deterministic(stream: Stream) -> None:
    """Deciding the same commands twice, or in the embedded graph, gives identical bytes."""
    first = [encode_decision(d) for d in decide_all(stream.records, stream.times)]
    second = [encode_decision(d) for d in decide_all(stream.records, stream.times)]
    assert first == second
    with scratch() as tmp:
        graph = open_graph(tmp, create=True, graph=GRAPH)
        try:
            graph.append(list(stream.records))
            graph.process()
            commands = graph.logs.commands.read(0, len(stream.records) + 1)
            logged = [r.value for r in graph.logs.decisions.read(0, len(stream.records) + 1)]
        finally:
            graph.close()
    assert [r.value for r in commands] == list(stream.records)
    replayed = decide_all([r.value for r in commands], [r.timestamp for r in commands])
    assert logged == [encode_decision(d) for d in replayed]


# -- 2. reads at a version equal the reference fold --------------------------------------------


UNDEFINED = ("undefined", None)


def halts(read: Callable[[], object]) -> tuple[bool | str, str | None]:
    """Whether a read raised UnknownSlotError (on_unknown: halt), and for which conflict;
    ``UNDEFINED`` when it named an edge type (or slot side) the schema does not define."""
    try:
        read()
    except UnknownSlotError as exc:
        return True, exc.conflict_id
    except InputError:
        return UNDEFINED
    return False, None


def defines(view: View, edge_type: str, side: str | None = None) -> bool:
    """Whether the schema in force defines the edge type (and, with ``side``, a slot there);
    with no schema in force nothing is checked."""
    if view.schema is None:
        return True
    info = view.schema.edge_types.get(edge_type)
    if info is None or side is None:
        return info is not None
    return info.cardinality in (EXCLUSIVE_SUBJECT if side == "out" else EXCLUSIVE_OBJECT)


def check_reads(graph: Graph, stream: Stream, view: View, v: int) -> None:
    """Every read the stream can ask at version ``v`` equals the reference view's answer."""
    reader = graph.reader
    for e in stream.edges:
        s, o = (e[1], e[2]), (e[3], e[4])
        want = view.edge(e)
        got_e = reader.edge(e[0], s, o, v, halt=False)
        assert (got_e.state, got_e.conflict_id, sorted(got_e.claims)) == want, f"edge {e} at {v}"
        halt = want[0] == "unknown" and view.halts(e[0])
        want_halt = (halt, want[1] if halt else None) if defines(view, e[0]) else UNDEFINED
        assert halts(partial(graph.edge, e[0], s, o, at=v)) == want_halt, f"edge {e} at {v}"
    for node in stream.nodes:
        for direction in ("out", "in"):
            for et in (None, *stream.edge_types):
                where = f"{(node, direction, et)} at {v}"
                want_n = view.neighbors(node, direction, et)
                rows = reader.neighbors(node, v, edge_type=et, direction=direction, halt=False)
                got_n = [
                    (n.edge_type, n.node, n.state, n.conflict_id, sorted(n.claims)) for n in rows
                ]
                assert sorted(got_n) == want_n, f"neighbors{where}"
                halt = any(n[2] == "unknown" and view.halts(n[0]) for n in want_n)
                read_n = partial(graph.neighbors, node, edge_type=et, direction=direction, at=v)
                want_n_halt = halt if et is None or defines(view, et) else UNDEFINED[0]
                assert halts(read_n)[0] == want_n_halt, f"neighbors{where}: halt"
                if et is None:
                    continue
                want_s = view.slot(et, node, direction)
                got_s = reader.slot(et, node, v, direction, halt=False)
                assert (got_s.state, got_s.conflict_id, sorted(got_s.nodes)) == want_s, (
                    f"slot{where}"
                )
                halt = want_s[0] == "unknown" and view.halts(et)
                want_halt = (halt, want_s[1] if halt else None)
                if not defines(view, et, direction):
                    want_halt = UNDEFINED
                read_s = partial(graph.slot, et, node, direction=direction, at=v)
                assert halts(read_s) == want_halt, f"slot{where}: halt"
    got_q = {c["conflict_id"]: sorted(c["claims"]) for c in graph.quarantine(at=v)}
    assert got_q == view.open_conflicts(), f"quarantine at version {v}"


# Failures these properties found (since fixed), pinned as examples so that they are always
# tried: random streams reach the last two only now and then. Everyone may write the one edge
# type; judge resolves.
OWNS: dict[str, Any] = {
    "name": "owns",
    "subject": "svc",
    "object": "svc",
    "writers": [{"agent": "*"}],
    "cardinality": "one-to-one",
    "conflict_policy": "quarantine",
}
ONE_TO_ONE: dict[str, Any] = {
    "principals": {"admins": ["admin"], "resolvers": ["judge"]},
    "node_types": ["svc"],
    "edge_types": [OWNS],
}
ONE_TO_MANY = {**ONE_TO_ONE, "edge_types": [{**OWNS, "cardinality": "one-to-many"}]}
# A withheld claim is retracted while its conflict stays open (the other two disagree).
RETRACT_IN_OPEN_CONFLICT = stream_of(
    ONE_TO_ONE,
    [
        claim("c0", "owns svc:n0 svc:n0", "a1"),
        claim("c3", "owns svc:n0 svc:n1", "a2"),  # slot conflict cf:c3 withholds c0
        claim("c1", "owns svc:n0 svc:n0", "a1"),  # joins cf:c3
        retract("c2", "c0", "a1"),
    ],
)
# A claim touches slots held by two open conflicts; then one of them closes.
TWO_CONFLICTS_ON_ONE_SLOT = stream_of(
    ONE_TO_ONE,
    [
        claim("c2", "owns svc:n0 svc:n1", "rogue"),
        claim("c3", "owns svc:n1 svc:n2", "judge"),
        claim("c4", "owns svc:n2 svc:n2", "rogue"),  # cf:c4: out:n1, out:n2, in:n2
        claim("c0", "owns svc:n0 svc:n0", "a1"),  # cf:c0: out:n0, in:n0, in:n1
        claim("c1", "owns svc:n1 svc:n1", "judge"),  # touches out:n1 (cf:c4) and in:n1 (cf:c0)
        resolve("c5", "cf:c4", None),
        claim("c9", "owns svc:n2 svc:n1", "a2"),  # into in:n1, still contested by cf:c0
    ],
)
# A new schema revision makes a side exclusive that already has several edges.
CARDINALITY_NARROWED = stream_of(
    ONE_TO_MANY,
    [
        claim("c0", "owns svc:n0 svc:n0", "a1"),
        claim("c1", "owns svc:n0 svc:n1", "a1"),
        publish("c2", ONE_TO_ONE),
        claim("c3", "owns svc:n0 svc:n2", "a2"),
    ],
)


@examples(300)
@given(
    streams(),
    st.sampled_from((1, 3, 2048)),
    st.none() | st.integers(0, 40),
    st.lists(st.integers(-1, 40), max_size=4),
)
@example(stream=RETRACT_IN_OPEN_CONFLICT, batch=2048, reopen=None, at=[])
@example(stream=TWO_CONFLICTS_ON_ONE_SLOT, batch=2048, reopen=None, at=[])
def test_reads_at_any_version_equal_the_reference_fold(
    stream: Stream, batch: int, reopen: int | None, at: list[int]
) -> None:
    """Every read of the projection at version V equals the reference fold of decisions <= V."""
    n = len(stream.records)
    reopen_at = None if reopen is None else min(reopen, n)  # close and reopen the graph there
    with graph_after(stream, batch, reopen_at) as graph:
        decisions = logged_decisions(graph)
        assert graph.head() == len(decisions) - 1
        for v in sorted({*(min(x, n - 1) for x in at), n - 1}):  # some versions, and head
            check_reads(graph, stream, fold(decisions, v), v)


# -- 3. authority -----------------------------------------------------------------------------


@examples(400)
@given(streams())
def test_no_unauthorised_write_is_accepted(stream: Stream) -> None:
    """Every admitted claim, retract, resolve and admin command came from someone allowed."""
    auth = Authority()
    for d, c in zip(decide_all(stream.records, stream.times), stream.commands, strict=True):
        admitted = d["kind"] != "rejected"
        if admitted:
            assert c is not None and d["agent"] == c["agent"] and d["task"] == c["task"]
        if d["kind"] in ("accepted", "conflicted", "quarantined") and d["claim"] is not None:
            assert c is not None and c["type"] == "claim"
            assert auth.may_write(c["edge_type"], c["agent"], c["task"], d["log_time"]), (
                f"{c['command_id']}: {c['agent']}/{c['task']} wrote {c['edge_type']} "
                f"at {d['log_time']} without authority"
            )
        elif admitted and c is not None and c["type"] in ("grant", "revoke", "publish_schema"):
            schema = auth.schema
            if schema is None:  # the first schema must name its publisher as an admin
                assert c["type"] == "publish_schema" and d["schema"] is not None
                schema = schema_info(d["schema"]["document"])
            assert schema.is_admin(c["agent"]), f"{c['command_id']}: not an admin"
        elif admitted and c is not None and c["type"] == "resolve":
            assert auth.schema is not None and auth.schema.is_resolver(c["agent"])
        elif admitted and c is not None and c["type"] == "retract":
            assert auth.owners.get(c["claim_id"]) == c["agent"], f"{c['command_id']}: not owner"
        auth.apply(d)


# -- 4. exactly one decision per command -----------------------------------------------------


@examples(200)
@given(streams(), st.sampled_from((1, 2, 5, 2048)), st.none() | st.integers(0, 40))
def test_exactly_one_decision_per_command(stream: Stream, batch: int, reopen: int | None) -> None:
    """One decision per command, in order, whatever the batches and restarts; ids are unique."""
    reopen_at = None if reopen is None else min(reopen, len(stream.records))
    with graph_after(stream, batch, reopen_at) as graph:
        decisions = logged_decisions(graph)
    assert len(decisions) == len(stream.records)
    assert decisions == decide_all(stream.records, stream.times)  # the pure core's, unchanged
    seen: set[str] = set()
    for i, (d, c) in enumerate(zip(decisions, stream.commands, strict=True)):
        assert d["input_offset"] == i
        assert d["log_time"] == stream.times[i]
        if d["kind"] == "rejected":  # a rejection changes nothing
            assert (d["claim"], d["schema"], d["grant"], d["conflict_id"]) == (None,) * 4
            assert d["supersedes"] == d["withheld"] == d["released"] == d["dismissed"] == []
        if c is None:
            assert d["kind"] == "rejected" and d["command_type"] == "undecodable"
            continue
        assert d["command_id"] == c["command_id"]
        duplicate = c["command_id"] in seen
        assert (d["reason"] == "duplicate_command") == duplicate, f"decision {i}"
        seen.add(c["command_id"])


# -- invariants at every version --------------------------------------------------------------


def invariant_problems(view: View) -> dict[str, list[str]]:
    """What breaks the invariants the governor must keep, by invariant."""
    problems: dict[str, list[str]] = {"polarity": [], "slot": [], "edge conflict": []}
    holders: dict[Slot, set[Edge]] = {}
    for e in sorted(view.known):
        polarities = {view.claims[k].asserts for k in view.visible(e)}
        if len(polarities) > 1:
            problems["polarity"].append(f"edge {e} has visible asserts and denies")
        if True in polarities:
            for slot in slots_of(view.schema, e):
                holders.setdefault(slot, set()).add(e)
        if len(view.edge_conflicts(e)) > 1:
            problems["edge conflict"].append(f"edge {e} is withheld in {view.edge_conflicts(e)}")
    for slot, edges in sorted(holders.items()):
        if len(edges) > 1:
            problems["slot"].append(f"exclusive slot {slot} has visible asserts on {sorted(edges)}")
    held = sorted({s for slots in view.held.values() for s in slots})
    problems["slot conflict"] = [
        f"slot {s} is held by {view.slot_holders(s)}" for s in held if len(view.slot_holders(s)) > 1
    ]
    return problems


def check_invariants(stream: Stream) -> None:
    view = View()
    for d in decide_all(stream.records, stream.times):
        view.apply(d)
        problems = invariant_problems(view)
        v = view.version
        assert problems["polarity"] == [], f"visible claims disagree at version {v}"
        assert problems["slot"] == [], f"exclusive slot with several edges at version {v}"
        assert problems["edge conflict"] == [], f"edge in several conflicts at version {v}"
        assert problems["slot conflict"] == [], f"slot held by several conflicts at version {v}"


@examples(1000)
@given(streams(revisions=(0, 0)))
@example(TWO_CONFLICTS_ON_ONE_SLOT)
def test_invariants_hold_at_every_version(stream: Stream) -> None:
    """Under one schema, at every version: one polarity per edge, one edge and one conflict per
    exclusive slot, one conflict per edge."""
    check_invariants(stream)


@examples(500)
@given(streams(revisions=(1, 2)))
@example(CARDINALITY_NARROWED)
def test_invariants_survive_schema_revisions(stream: Stream) -> None:
    """The same invariants hold at every version when later publishes change the schema."""
    check_invariants(stream)
