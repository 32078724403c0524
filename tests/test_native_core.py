"""The native decide against its specification, the Python governor (claimgraph.core).

Each command stream runs through two governors side by side, one deciding with
:func:`claimgraph.core.governor.decide` and folding with ``GraphState.evolve``, one with
:func:`claimgraph.native.decide.decide` and :func:`~claimgraph.native.decide.evolve` (native
where they cover the command or decision, Python for the rest): every decision must have the
same keys in the same order and the same bytes, every fold the same ``Changes``, and both
states the same canonical digest (core.snapshot) as they go. The strategies' mixed streams
exercise the declines; the hot streams below are what ingest sees (assert, deny, retract by
writers) and mostly run natively, with unicode ids, evidence, properties and
based_on_version. Under
``CI=true`` these tests fail if the native module is not loaded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimgraph.core.governor import decide as python_decide
from claimgraph.core.model import LIMITS, Cardinality, ConflictPolicy, OnStale
from claimgraph.core.snapshot import state_digest
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_command, encode_decision
from claimgraph.native import decide as native
from claimgraph.native import spill
from claimgraph.native.codec import native_codecs
from tests.native_support import require_native, tiny_spill, typed
from tests.strategies import GRAPH, T0, Stream, publish, stream_of, streams

pytestmark = pytest.mark.usefixtures("_native")


@pytest.fixture
def _native() -> None:
    require_native()


def run_both(records: list[bytes], times: list[int], every: int = 8) -> tuple[int, int]:
    """Decide ``records`` with both cores; compare decisions and state digests as they go.

    Returns (decided natively, declined) for this stream.
    """
    py, nat = GraphState(GRAPH, native_tables=False), GraphState(GRAPH)
    before = sum(native.DECIDED.values()), sum(native.DECLINED.values())
    for i, (record, now) in enumerate(zip(records, times, strict=True)):
        expected = python_decide(py, record, i, now)
        got = native.decide(nat, record, i, now)
        assert list(got) == list(expected), f"keys differ at {i}"
        assert typed(got) == typed(expected), f"decision {i} differs: {got} != {expected}"
        raw = encode_decision(expected)
        assert encode_decision(got) == raw
        nc = native_codecs()
        assert nc is not None and nc.writers["decision"].encode(got) == raw
        ch_py = py.evolve(expected, i, raw)
        ch_nat = native.evolve(nat, got, i, raw)
        assert ch_nat == ch_py, f"changes of {i} differ"
        if i % every == 0:
            assert state_digest(nat) == state_digest(py)
    assert state_digest(nat) == state_digest(py)
    if spill.configured() is not None and len(nat.claims) > 4:
        assert nat.claims.store.spilled() > 0, "the tiny spill took no claim"
    assert native.DECLINED["error"] == 0, "the native path failed on a Python error"
    return (
        sum(native.DECIDED.values()) - before[0],
        sum(native.DECLINED.values()) - before[1],
    )


def test_the_native_core_is_loaded_on_ci() -> None:
    from claimgraph import native as n

    assert n.which() == "native"
    assert native._hot() is not None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_mixed_streams_decide_the_same(s: Stream) -> None:
    """The strategies' streams: conflicts, grants, resolves, garbage (mostly declined)."""
    run_both(list(s.records), list(s.times))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_mixed_streams_decide_the_same_with_a_tiny_spill(s: Stream) -> None:
    """The same, the native tables keeping 2 claims in memory and the rest in the spill."""
    with tiny_spill():
        run_both(list(s.records), list(s.times))


# -- hot streams: what ingest sees ----------------------------------------------------------

_IDS = ("n0", "n1", "n2", "ñ3", "節点")
_AGENTS = ("w1", "w2", "w3", "wé")
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFF), max_size=12
)


def _edge(draw: st.DrawFn, pool: tuple[str, ...], limit: str, prefix: str = "") -> str:
    """Mostly a value of ``pool``; now and then one at the bound ``LIMITS[limit]`` or just past
    it (read when drawn: a bound changed in the specification moves the edge with it)."""
    if draw(st.integers(0, 11)):
        return draw(st.sampled_from(pool))
    n = LIMITS[limit] + draw(st.sampled_from((0, 1)))
    return prefix + draw(st.sampled_from(("x", "é"))) * (n - len(prefix))


def _hot_schema(cardinality: str, policy: str, on_stale: str = "reject") -> dict[str, Any]:
    return {
        "principals": {"admins": ["admin"], "resolvers": ["judge"]},
        "node_types": ["svc", "env"],
        "edge_types": [
            {
                "name": "runs_in",
                "subject": "svc",
                "object": "env",
                "writers": [{"agent": "w*"}],
                "cardinality": cardinality,
                "conflict_policy": policy,
                "on_stale": on_stale,
            },
            {
                "name": "peer",
                "subject": "svc",
                "object": "svc",
                "writers": [{"agent": "w1", "task": "t1"}],
                "cardinality": "many-to-many",
                "conflict_policy": "last-write-wins-with-timestamp",
            },
        ],
    }


@st.composite
def hot_streams(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    schema = _hot_schema(
        draw(st.sampled_from([c.value for c in Cardinality])),
        draw(st.sampled_from([p.value for p in ConflictPolicy])),
        draw(st.sampled_from([o.value for o in OnStale])),
    )
    commands: list[dict[str, Any]] = [publish("s0", schema)]
    claims: list[tuple[str, str]] = []
    for i in range(draw(st.integers(1, 40))):
        cid = draw(st.sampled_from((f"c{i}", f"c{i}", f"c{i}", "c0", f"ç{i}")))
        agent = _edge(draw, _AGENTS, "id", "w")
        if claims and draw(st.integers(0, 5)) == 0:
            target, owner = draw(st.sampled_from(claims))
            who = owner if draw(st.integers(0, 3)) else agent
            commands.append(
                {
                    "type": "retract",
                    "command_id": cid,
                    "graph": GRAPH,
                    "agent": who,
                    "task": "t1",
                    "run_id": None,
                    "claim_id": target,
                    "reason": draw(_TEXT),
                }
            )
            continue
        edge = draw(st.sampled_from(("runs_in", "runs_in", "runs_in", "peer")))
        commands.append(
            {
                "type": "claim",
                "command_id": cid,
                "graph": GRAPH,
                "agent": agent,
                "task": draw(st.sampled_from(("t1", "t2", ""))),
                "run_id": draw(st.sampled_from((None, "r1", "rün"))),
                "edge_type": edge,
                "subject_type": "svc",
                "subject_id": _edge(draw, _IDS, "id"),
                "object_type": "env" if edge == "runs_in" else "svc",
                "object_id": draw(st.sampled_from(_IDS)),
                "polarity": draw(st.sampled_from(("assert", "assert", "deny"))),
                "confidence": draw(st.sampled_from((1.0, 0.5, 0.0, 0.123456789))),
                "evidence": draw(st.lists(_TEXT, max_size=3)),
                "reasoning": draw(_TEXT),
                "asserted_at": T0 + draw(st.integers(0, 20)),
                "based_on_version": draw(st.none() | st.integers(-1, i + 2)),
                "properties": {
                    **draw(st.dictionaries(_TEXT, _TEXT, max_size=3)),
                    "p": _edge(draw, ("v",), "property_value"),
                },
            }
        )
        claims.append((cid, agent))
    records = [encode_command(c) for c in commands]  # type: ignore[arg-type]
    times = [T0 + i for i in range(len(records))]
    return records, times


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hot_streams())
def test_hot_streams_decide_the_same(stream: tuple[list[bytes], list[int]]) -> None:
    """What ingest sees, with the tables in memory and with a tiny spill."""
    with tiny_spill():
        run_both(*stream)
    run_both(*stream)


def test_hot_streams_run_mostly_natively() -> None:
    """The covered cases are really taken natively: a plain stream of new claims, updates
    and retracts of one's own claims is decided natively except the schema's publish."""
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    commands = []
    for i in range(60):
        svc = f"s{i % 20}"
        cmd = {
            "type": "claim",
            "command_id": f"c{i}",
            "graph": GRAPH,
            "agent": "w1",
            "task": "t1",
            "run_id": None,
            "edge_type": "runs_in",
            "subject_type": "svc",
            "subject_id": svc,
            "object_type": "env",
            "object_id": f"e{i % 3}",
            "polarity": "assert",
            "confidence": 1.0,
            "evidence": ["log#1"],
            "reasoning": "seen",
            "asserted_at": T0 + i,
            "based_on_version": None,
            "properties": {"z": "1", "a": "2"},
        }
        commands.append(cmd)
    commands.append(
        {
            "type": "retract",
            "command_id": "r1",
            "graph": GRAPH,
            "agent": "w1",
            "task": "t1",
            "run_id": None,
            "claim_id": "c59",
            "reason": "gone",
        }
    )
    s = stream_of(schema, commands)
    native.reset_counts()
    decided, declined = run_both(list(s.records), list(s.times))
    assert (decided, declined) == (61, 1)
    assert native.DECLINED == {"no_schema": 1}
    assert native.DECIDED == {"claim": 60, "retract": 1}
    assert native.FOLDED == {"claim": 60, "retract": 1}


def test_declines_are_named() -> None:
    """Conflicts, refusals and other command kinds go to Python, each counted by its reason."""
    schema = _hot_schema("many-to-one", "quarantine")
    c = {
        "type": "claim",
        "graph": GRAPH,
        "task": "t1",
        "run_id": None,
        "edge_type": "runs_in",
        "subject_type": "svc",
        "subject_id": "s",
        "object_type": "env",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "asserted_at": T0,
        "based_on_version": None,
        "properties": {},
    }
    commands = [
        {**c, "command_id": "a", "agent": "w1", "object_id": "prod"},  # native: new
        {**c, "command_id": "b", "agent": "w2", "object_id": "dev"},  # slot conflict
        {**c, "command_id": "a", "agent": "w1", "object_id": "x"},  # duplicate id: native
        {**c, "command_id": "d", "agent": "rogue", "object_id": "x"},  # unauthorised
        {**c, "command_id": "e", "agent": "w1", "object_id": "x", "graph": "other"},
    ]
    s = stream_of(schema, commands)
    native.reset_counts()
    run_both(list(s.records), list(s.times), every=1)
    assert native.DECIDED == {"claim": 2}
    assert native.DECLINED == {"no_schema": 1, "conflict": 1, "grant": 1, "refused": 1}


def test_the_chain_fields_are_python_s() -> None:
    """command_sha256 is the SHA-256 of the record; prev_hash the chain before it."""
    from claimgraph import native as n

    assert n.module is not None
    for size in (*range(130), 1000, 4096):
        data = bytes((i * 7 + size) & 0xFF for i in range(size))
        expected = hashlib.sha256(data).hexdigest()
        assert n.module.sha256_hex(data) == expected  # the CPU's SHA extensions, where present
        assert n.module.sha256_hex(data, True) == expected  # and without


def test_legacy_graphs_decide_in_python() -> None:
    """A graph under rules revision 1 is decided by Python (its rules are not ported)."""
    state = GraphState(GRAPH)
    state.rules = 1
    native.reset_counts()
    record = encode_command(publish("s0", _hot_schema("many-to-many", "quarantine")))  # type: ignore[arg-type]
    d = native.decide(state, record, 0, T0)
    assert d["rules"] == 1
    assert native.DECLINED == {"rules": 1}
    assert json.dumps(native.DECIDED) == "{}"


# -- the runtimes: what the native path decides, the Python core verifies -----------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=hot_streams())
def test_the_embedded_runtime_decides_natively_and_verifies(
    tmp_path_factory: pytest.TempPathFactory, stream: tuple[list[bytes], list[int]]
) -> None:
    """A graph's commands decided by the embedded runtime (native where covered) re-decide,
    byte for byte, under the Python core (``verify``), and re-project to the same rows
    (``audit``); the state it folded is the Python core's."""
    import claimgraph
    from claimgraph.service.audit import audit, verify

    records, _ = stream
    g = claimgraph.open(tmp_path_factory.mktemp("g"), create=True, graph=GRAPH)
    try:

        def seen() -> int:
            return sum(native.DECIDED.values()) + sum(native.DECLINED.values())

        before = seen()
        g.append(records)
        assert g.process() == len(records)
        assert seen() - before == len(records)  # every command went by the native path
        assert verify(g).decisions == len(records)
        audit(g)
        py = GraphState(GRAPH, native_tables=False)
        logged = g.logs.decisions.read(0, len(records))
        for i, rec in enumerate(g.logs.commands.read(0, len(records))):
            d = python_decide(py, rec.value, rec.offset, rec.timestamp)
            assert encode_decision(d) == logged[i].value
            py.evolve(d, i, logged[i].value)
        runtime = g._runtime
        assert runtime is not None
        assert type(runtime.state.claims).__name__ == "ClaimMap"  # the native tables
        assert native.DECLINED["tables"] == 0
        assert state_digest(runtime.state) == state_digest(py)
    finally:
        g.close()


@pytest.mark.parametrize(
    "at",
    [1, 951_782_400_000, 951_868_799_999, 4_102_444_800_000, 253_402_300_799_999, T0],
    ids=["epoch", "leap-day", "leap-day-end", "2100", "9999", "T0"],
)
def test_older_claims_are_conflicted_natively(at: int) -> None:
    """Last-write-wins: a claim older than the standing one is conflicted, natively, with
    Python's ISO 8601 times in its detail (leap days, centuries, the last ms of year 9999)."""
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    base = {
        "type": "claim",
        "graph": GRAPH,
        "agent": "w1",
        "task": "t1",
        "run_id": None,
        "edge_type": "runs_in",
        "subject_type": "svc",
        "subject_id": "s",
        "object_type": "env",
        "object_id": "prod",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "based_on_version": None,
        "properties": {},
    }
    commands = [
        {**base, "command_id": "new", "asserted_at": at},
        {**base, "command_id": "old", "asserted_at": at - 1, "object_id": "dev"},
    ]
    s = stream_of(schema, commands)
    native.reset_counts()
    run_both(list(s.records), list(s.times), every=1)
    assert native.DECIDED == {"claim": 2}
    assert native.FOLDED == {"claim": 2}


def test_stale_and_duplicate_claims_are_rejected_natively() -> None:
    """on_stale: reject, and a command id already decided: rejections made and folded
    natively, as Python makes them (the detail quotes the id as Python's repr does)."""
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    c = {
        "type": "claim",
        "graph": GRAPH,
        "agent": "w1",
        "task": "t1",
        "run_id": None,
        "edge_type": "runs_in",
        "subject_type": "svc",
        "subject_id": "s",
        "object_type": "env",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "based_on_version": None,
        "properties": {},
    }
    commands = [
        {**c, "command_id": "a'\"", "object_id": "prod", "asserted_at": T0},
        {**c, "command_id": "b", "object_id": "dev", "asserted_at": T0 + 1},  # the slot moves
        {**c, "command_id": "c", "object_id": "qa", "asserted_at": T0 + 2, "based_on_version": 1},
        {**c, "command_id": "a'\"", "object_id": "qa", "asserted_at": T0 + 3},  # again
        {**c, "command_id": "ü", "object_id": "qa", "asserted_at": T0 + 4, "based_on_version": 9},
    ]
    s = stream_of(schema, commands)
    native.reset_counts()
    run_both(list(s.records), list(s.times), every=1)
    assert native.DECIDED == {"claim": 4}
    assert native.DECLINED == {"no_schema": 1, "refused": 1}  # a future version: Python's
    assert native.FOLDED == {"claim": 5}  # every rejection is folded natively


@pytest.mark.parametrize("on_stale", ["accept", "quarantine"])
def test_stale_claims_accepted_natively_or_held_by_python(on_stale: str) -> None:
    """on_stale: accept is the plain path with the claim flagged stale (native);
    on_stale: quarantine opens a conflict (Python)."""
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp", on_stale)
    c = {
        "type": "claim",
        "graph": GRAPH,
        "agent": "w1",
        "task": "t1",
        "run_id": None,
        "edge_type": "runs_in",
        "subject_type": "svc",
        "subject_id": "s",
        "object_type": "env",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "based_on_version": None,
        "properties": {},
    }
    commands = [
        {**c, "command_id": "a", "object_id": "prod", "asserted_at": T0},
        {**c, "command_id": "b", "object_id": "dev", "asserted_at": T0 + 1},
        {**c, "command_id": "c", "object_id": "qa", "asserted_at": T0 + 2, "based_on_version": 1},
    ]
    s = stream_of(schema, commands)
    native.reset_counts()
    run_both(list(s.records), list(s.times), every=1)
    if on_stale == "accept":
        assert native.DECIDED == {"claim": 3}
    else:
        assert native.DECIDED == {"claim": 2}
        assert native.DECLINED == {"no_schema": 1, "stale": 1}
