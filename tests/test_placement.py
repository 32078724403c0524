"""Placement and decisions that fit: ``decide(..., partition=)`` (issue 11), by the core in use.

``claimgraph.native.decide`` decides (natively where it covers the command; ``make test`` runs
this file on both cores) and folds, as a Kafka partition's governor does.

A graph is decided on a Kafka partition only after a ``place`` record put it there (rules
revision 2; revision-1 graphs keep deciding unplaced and can be adopted), and a decision that
would exceed ``LIMITS["decision_bytes"]`` is recorded as a ``too_large`` rejection that keeps
the envelope and the hash chain.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimgraph.core.chain import command_digest
from claimgraph.core.governor.placement import BAD_KEY, UNKEYED, UNPLACED, _bound, route
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import LIMITS, Decision
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_command, encode_decision
from claimgraph.native.decide import decide, evolve
from tests.conftest import SCHEMA
from tests.strategies import GRAPH, Stream, streams

T0 = 1_800_000_000_000
OPERATOR = "claimgraph-kafka"  # the operator every Partition's governor is configured with


def _place(graph: str, partition: int, cid: str = "place-1", agent: str = OPERATOR) -> bytes:
    return encode_command(
        {
            "type": "place",
            "command_id": cid,
            "graph": graph,
            "agent": agent,
            "task": "place",
            "partition": partition,
        }
    )


def _publish(graph: str, cid: str = "s1") -> bytes:
    return encode_command(
        {
            "type": "publish_schema",
            "command_id": cid,
            "graph": graph,
            "agent": "admin",
            "task": "",
            "document": SCHEMA,
            "source": "s.yaml",
        }
    )


def _claim(graph: str, cid: str, **fields: Any) -> bytes:
    cmd: dict[str, Any] = {
        "type": "claim",
        "command_id": cid,
        "graph": graph,
        "agent": "inventory",
        "task": "t",
        "run_id": None,
        "edge_type": "depends_on",
        "subject_type": "service",
        "subject_id": "a",
        "object_type": "service",
        "object_id": "b",
        "polarity": "assert",
        "confidence": 0.9,
        "evidence": [],
        "reasoning": "",
        "asserted_at": T0,
        "based_on_version": None,
        "properties": {},
        **fields,
    }
    return encode_command(cmd)  # type: ignore[arg-type]


class Partition:
    """One graph's commands on one partition, decided and folded in order."""

    def __init__(self, graph: str, partition: int | None, rules: int | None = None) -> None:
        self.state = GraphState(graph)
        self.partition = partition
        self.rules = rules  # the revision of the first decision (None: the newest)
        self.offset = 0

    def decide(self, data: bytes) -> Decision:
        rules = self.rules if self.state.rules is None else None
        d = decide(
            self.state,
            data,
            self.offset,
            T0 + self.offset,
            rules=rules,
            partition=self.partition,
            operator=OPERATOR,
        )
        evolve(self.state, d, self.offset, encode_decision(d))
        self.offset += 1
        return d


def test_a_place_is_accepted_only_in_the_partition_it_names() -> None:
    """``place`` for partition 2 is accepted on partition 2, misrouted on 1 and embedded."""
    here = Partition("refunds", 2).decide(_place("refunds", 2))
    assert (here["kind"], here["reason"], here["count"]) == ("accepted", "placed", 2)
    for where in (1, None):
        d = Partition("refunds", where).decide(_place("refunds", 2))
        assert (d["kind"], d["reason"], d["count"]) == ("rejected", "misrouted", 0)
        assert "names partition 2" in d["detail"]


def test_an_unplaced_graph_is_misrouted_until_placed_then_decided() -> None:
    """Revision 2: every command before the graph's place is rejected, none after it."""
    p = Partition("refunds", 3)
    before = p.decide(_publish("refunds", "s0"))
    assert (before["kind"], before["reason"]) == ("rejected", "misrouted")
    assert "kafka place" in before["detail"] and p.state.schema is None
    assert p.decide(_place("refunds", 3))["reason"] == "placed"
    assert p.decide(_publish("refunds"))["kind"] == "accepted"
    assert p.decide(_claim("refunds", "c1"))["reason"] == "new"
    again = p.decide(_place("refunds", 3, "place-2"))  # placing again is harmless
    assert (again["kind"], again["detail"][-7:]) == ("accepted", "(again)")
    assert p.state.placed == 3


def test_a_place_on_another_partition_leaves_the_graph_unplaced_here() -> None:
    """A graph placed on 3 is misrouted on 1, even after a place record for 3 lands on 1."""
    p = Partition("refunds", 1)
    p.decide(_place("refunds", 3))
    assert p.state.placed is None
    assert p.decide(_publish("refunds"))["reason"] == "misrouted"


def test_revision_1_graphs_decide_unplaced_and_can_be_adopted() -> None:
    """A graph decided under revision 1 keeps working unplaced; a place adopts it there."""
    p = Partition("legacy", 0, rules=1)
    d = p.decide(_publish("legacy"))
    assert (d["kind"], d["rules"]) == ("accepted", 1)
    assert p.decide(_claim("legacy", "c1"))["reason"] == "new"
    adopted = p.decide(_place("legacy", 0))
    assert (adopted["reason"], adopted["rules"], p.state.placed) == ("placed", 1, 0)


def test_an_upgrade_of_an_unplaced_graph_is_judged_under_the_old_revision() -> None:
    """The upgrade_rules decision of an unplaced revision-1 graph is accepted (the check
    reads the revision in force); the graph's next commands are then misrouted."""
    p = Partition("legacy", 0, rules=1)
    p.decide(_publish("legacy"))
    up = encode_command(
        {
            "type": "upgrade_rules",
            "command_id": "up",
            "graph": "legacy",
            "agent": "admin",
            "task": "",
            "to": 2,
        }
    )
    d = p.decide(up)
    assert (d["kind"], d["rules"]) == ("accepted", 2)
    assert p.decide(_claim("legacy", "c1"))["reason"] == "misrouted"


def test_records_whose_key_names_no_graph_are_misrouted_with_the_reason() -> None:
    """The buckets of unkeyed and bad-key records are never placed and say why."""
    for bucket, words in ((UNKEYED, "has no key"), (BAD_KEY, "not a graph name")):
        p = Partition(bucket, 0)
        d = p.decide(_claim("refunds", "c1"))
        assert (d["graph"], d["reason"]) == (bucket, "misrouted") and words in d["detail"]
        refused = p.decide(_place(bucket, 0))  # nobody can place a bucket
        assert refused["kind"] == "rejected" and p.state.placed is None


def _huge_claim() -> bytes:
    """A claim whose rejection echoes ~1 MiB: agent and task just under the limit between
    them, so that the command fits where its decision does not."""
    half = LIMITS["decision_bytes"] // 2
    return _claim("refunds", "big", agent="a" * half, task="t" * half)


def test_a_decision_over_the_bound_is_a_too_large_rejection_that_keeps_the_chain() -> None:
    """The replacement fits, keeps the envelope (ids bounded) and the chain fields decide
    sets, carries no effect, and the graph goes on deciding."""
    p = Partition("refunds", 0)
    p.decide(_place("refunds", 0))
    p.decide(_publish("refunds"))
    data = _huge_claim()
    chain_before = p.state.chain.hex()
    d = p.decide(data)
    raw = encode_decision(d)
    assert (d["kind"], d["reason"]) == ("rejected", "too_large")
    assert len(raw) <= LIMITS["decision_bytes"]
    assert "would have been rejected field_too_large" in d["detail"]
    assert (d["command_sha256"], d["prev_hash"]) == (command_digest(data), chain_before)
    assert (d["command_id"], d["command_type"], d["rules"]) == ("big", "claim", CURRENT)
    assert len(d["agent"]) == LIMITS["id"] and d["agent"].endswith("…")
    assert p.decide(_claim("refunds", "c2"))["reason"] == "new"


def test_revision_1_keeps_an_oversized_decision_as_it_was() -> None:
    """Under revision 1 nothing is replaced: the decision is what revision 1 decided."""
    p = Partition("legacy", None, rules=1)
    p.decide(_publish("legacy"))
    d = p.decide(_legacy_huge())
    assert (d["reason"], d["rules"]) == ("field_too_large", 1)
    assert len(encode_decision(d)) > LIMITS["decision_bytes"]


def _legacy_huge() -> bytes:
    half = LIMITS["decision_bytes"] // 2
    return _claim("legacy", "big", agent="a" * half, task="t" * half)


_IDS = ("command_id", "claim_id", "winner", "conflict_id", "grant_id", "subject_id",
        "object_id", "run_id", "reasoning", "reason", "rationale")  # fmt: skip


def _inflated(cmd: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The command with every id and text grown by ``suffix`` (references stay consistent:
    a conflict id is ``cf:`` + a command id)."""
    out = dict(cmd)
    for k in _IDS:
        if isinstance(out.get(k), str):
            out[k] += suffix
    if isinstance(out.get("evidence"), list):
        out["evidence"] = [e + suffix for e in out["evidence"]] + [suffix]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k + suffix: v + suffix for k, v in out["properties"].items()}
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams(), st.integers(0, 80))
def test_the_size_bound_is_never_below_a_decision_size(stream: Stream, grow: int) -> None:
    """``decide`` encodes a decision only when a cheap bound exceeds the limit: the bound
    must hold for every decision (here with ids and texts grown by 4-byte characters)."""
    state = GraphState(GRAPH)
    suffix = "\U0001f600" * grow
    for i, (cmd, raw, t) in enumerate(
        zip(stream.commands, stream.records, stream.times, strict=True)
    ):
        data = raw if cmd is None else encode_command(_inflated(cmd, suffix))  # type: ignore[arg-type]
        d = decide(state, data, i, t)
        assert _bound(d, len(data)) >= len(encode_decision(d))
        state.evolve(d, i)


def test_only_the_operator_places_a_graph_under_revision_6() -> None:
    """Revision 6: a place by another agent is rejected not_operator and places nothing."""
    p = Partition("refunds", 3)
    d = p.decide(_place("refunds", 3, "place-rogue", agent="rogue-agent"))
    assert (d["kind"], d["reason"], d["rules"]) == ("rejected", "not_operator", 6)
    assert "rogue-agent" in d["detail"] and OPERATOR in d["detail"]
    assert p.state.placed is None
    assert p.decide(_publish("refunds"))["reason"] == "misrouted"  # rogue's schema: refused
    assert p.decide(_place("refunds", 3))["reason"] == "placed"
    assert p.state.placed == 3


def test_without_a_configured_operator_nobody_places() -> None:
    """Revision 6 with no operator (``operator=None``): every place is not_operator."""
    st = GraphState("refunds")
    d = decide(st, _place("refunds", 0), 0, T0, partition=0)
    assert (d["kind"], d["reason"]) == ("rejected", "not_operator")
    assert "no operator is configured" in d["detail"]


def test_revision_5_keeps_accepting_anyone_s_place() -> None:
    """Placements decided under revision 5 stay as they were: any agent's place is accepted."""
    p = Partition("refunds", 3, rules=5)
    d = p.decide(_place("refunds", 3, agent="rogue-agent"))
    assert (d["kind"], d["reason"], d["rules"]) == ("accepted", "placed", 5)


def test_a_place_is_signed_when_signatures_are_required_under_revision_6() -> None:
    """Revision 6: an unsigned place of a graph whose schema requires signatures is refused
    (revision 5 exempted it)."""
    signed = SCHEMA.replace("  admins: [admin]\n", "  admins: [admin]\n  signatures: required\n")
    for rules, reason in ((6, "unsigned"), (5, "placed")):
        p = Partition("refunds", 3, rules=rules)
        assert p.decide(_place("refunds", 3))["reason"] == "placed"
        publish = encode_command(
            {
                "type": "publish_schema",
                "command_id": "s-signed",
                "graph": "refunds",
                "agent": "admin",
                "task": "",
                "document": signed,
                "source": "s.yaml",
            }
        )
        assert p.decide(publish)["kind"] == "accepted"
        again = p.decide(_place("refunds", 3, "place-2"))
        assert again["reason"] == reason, (rules, again["detail"])


def _route(states: dict[str, GraphState], key: bytes | None, data: bytes, offset: int) -> Any:
    graph, d = route(states, key, data, offset, T0 + offset, decide, partition=0, operator=OPERATOR)
    evolve(states[graph], d, states[graph].decisions, encode_decision(d))
    return graph, d


def test_records_of_no_graph_share_one_bucket_that_remembers_nothing() -> None:
    """Revision 6: distinct unplaced keys (and rogue places) are decided in one bucket whose
    state does not grow: no graph per key, no command id, no offsets."""
    states: dict[str, GraphState] = {}
    for i in range(200):
        graph, d = _route(states, f"junk-{i}".encode(), _claim(f"junk-{i}", f"c{i}"), i)
        assert (graph, d["graph"], d["reason"]) == (UNPLACED, UNPLACED, "misrouted")
        assert d["command_id"] == "" and f"'junk-{i}'" in d["detail"]
    graph, d = _route(states, b"refunds", _place("refunds", 0, "p-r", agent="rogue"), 200)
    assert (graph, d["reason"]) == (UNPLACED, "not_operator")
    for key in (None, b"_x"):
        assert _route(states, key, _claim("refunds", "c-bad"), 201)[0] == UNPLACED
    assert set(states) == {UNPLACED}
    bucket = states[UNPLACED]
    assert bucket.other_commands == set() and bucket.offsets is None and not bucket.claims
    graph, d = _route(states, b"refunds", _place("refunds", 0), 203)  # the operator's place
    assert (graph, d["reason"]) == ("refunds", "placed") and states["refunds"].placed == 0
    assert _route(states, b"refunds", _publish("refunds"), 204)[1]["kind"] == "accepted"


def test_the_bucket_is_a_hash_chain_of_its_own() -> None:
    """Each bucket decision links to the bucket's previous one."""
    states: dict[str, GraphState] = {}
    _, first = _route(states, b"a", _claim("a", "c1"), 0)
    chain = states[UNPLACED].chain.hex()
    _, second = _route(states, b"b", _claim("b", "c2"), 1)
    assert first["prev_hash"] != second["prev_hash"] == chain


def test_keys_decided_before_revision_6_stay_graphs_of_their_own() -> None:
    """A key decided in a fresh state under revision 5 keeps that state (old logs replay)."""
    states: dict[str, GraphState] = {}
    graph, d = route(
        states,
        b"junk",
        _claim("junk", "c1"),
        0,
        T0,
        decide,
        partition=0,
        operator=OPERATOR,
        rules=5,
    )
    assert (graph, d["rules"], d["command_id"]) == ("junk", 5, "c1") and "junk" in states
