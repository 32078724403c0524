"""The fold's memory habits.

In Python dicts (the pure core): at a million claims every duplicated string costs ~90 MB, so
the fold keeps one object for a claim's id (the ``claims`` key and the entry in its edge's
``visible`` tuple) and one for an edge's key (the claim's ``edge``, the ``edges`` key and a slot
holder's value). In the native core's tables (the default with the native core): no Python
object per claim or edge at all, and a bounded number of bytes each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from claimgraph.core.governor import decide as python_decide
from claimgraph.core.snapshot import state_digest
from claimgraph.core.state import Changes, ClaimState, EdgeState, GraphState
from claimgraph.core.wire import encode_decision
from claimgraph.native import decide as native
from tests.native_support import require_native
from tests.strategies import GRAPH, claim, retract, stream_of

SCHEMA: dict[str, Any] = {
    "principals": {"admins": ["admin"], "resolvers": ["judge"]},
    "node_types": ["svc", "env"],
    "edge_types": [
        {
            "name": "runs_in",
            "subject": "svc",
            "object": "env",
            "writers": [{"agent": "w*"}],
            "cardinality": "many-to-one",
            "conflict_policy": "last-write-wins-with-timestamp",
        },
        {
            "name": "peer",
            "subject": "svc",
            "object": "svc",
            "writers": [{"agent": "w*"}],
            "cardinality": "many-to-many",
            "conflict_policy": "last-write-wins-with-timestamp",
        },
    ],
}


def _commands() -> list[dict[str, Any]]:
    out = []
    for i in range(40):  # svc i moves between envs (supersedes), peers are many-to-many
        out.append(claim(f"c{i}", f"runs_in svc:s{i % 10} env:e{i % 3}", "w1", at=i))
        out.append(claim(f"p{i}", f"peer svc:s{i} svc:s{i + 1}", "w2", at=i))
    out.append(retract("r1", "p7", "w2"))
    return out


def _fold(
    evolve: Callable[[GraphState, Any, int, bytes], Changes], tables: bool = False
) -> GraphState:
    s = stream_of(SCHEMA, _commands())
    state = GraphState(GRAPH, native_tables=tables)
    for i, (record, now) in enumerate(zip(s.records, s.times, strict=True)):
        d = python_decide(state, record, i, now)
        evolve(state, d, i, encode_decision(d))
    return state


def _python(state: GraphState, d: Any, version: int, raw: bytes) -> Changes:
    return state.evolve(d, version, raw)


def _native(state: GraphState, d: Any, version: int, raw: bytes) -> Changes:
    require_native()
    native.reset_counts()
    ch = native.evolve(state, d, version, raw)
    if d["command_type"] in ("claim", "retract"):
        assert native.FOLDED, "the native fold did not take a hot decision"
    return ch


def test_one_string_per_key_and_id() -> None:
    """In dicts: every id in a visible tuple is the ``claims`` key object; every edge key and
    slot holder value is the ``edge`` object of a claim on that edge."""
    state = _fold(_python)
    id_objects = {id(k) for k in state.claims}
    edge_objects = {id(cs.edge) for cs in state.claims.values()}
    visible = [c for es in state.edges.values() for c in es.visible]
    assert len(visible) > 40
    assert all(id(c) in id_objects for c in visible)
    assert all(id(k) in edge_objects for k in state.edges)
    assert state.slot_holder, "the schema has exclusive slots"
    assert all(id(k) in edge_objects for k in state.slot_holder.values())


def test_tables_fold_the_same_state() -> None:
    """The native fold over the native tables, and the Python fold over them, give the state
    the Python fold gives over dicts (the digest is the canonical encoding)."""
    require_native()
    want = state_digest(_fold(_python))
    assert state_digest(_fold(_native, tables=True)) == want
    assert state_digest(_fold(_python, tables=True)) == want


def test_tables_hold_a_claim_in_a_bounded_number_of_bytes() -> None:
    """100,000 claims on 100,000 edges: the tables' native bytes per claim (capacity, with the
    edge, its key and the claim id) stay under 150, and no Python object is kept per claim."""
    require_native()
    state = GraphState(GRAPH)
    claims = state.claims
    assert type(claims).__name__ == "ClaimMap"
    edges = state.edges
    n = 100_000
    for i in range(n):
        cid = f"c-{i:08d}-5f2b0c9e"  # 19 characters, like a short uuid-ish id
        key = f"runs_in\x1fsvc\x1fs{i}\x1fenv\x1fe{i % 3}"
        claims[cid] = ClaimState(key, "w1", True, 1_700_000_000_000 + i, 1, None, 0.9, i)
        edges[key] = EdgeState()
        edges[key].visible = (cid,)
    assert len(claims) == len(edges) == n
    per_claim = claims.store.memory() / n
    assert per_claim < 150, per_claim
    assert claims["c-00000007-5f2b0c9e"].edge.endswith("s7\x1fenv\x1fe1")
    assert edges[claims["c-00000007-5f2b0c9e"].edge].visible == ("c-00000007-5f2b0c9e",)


def test_pure_mode_folds_in_python_dicts() -> None:
    """``CLAIMGRAPH_PURE=1``: the Python core, and its state in Python dicts (no native table
    is made); without it (and the native core built) the tables are the default."""
    import os
    import subprocess
    import sys

    probe = (
        "import claimgraph.native as n; from claimgraph.core.state import GraphState;"
        "s = GraphState('g'); print(n.which(), type(s.claims).__name__, type(s.edges).__name__)"
    )
    env = {**os.environ, "CLAIMGRAPH_PURE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["python", "dict", "dict"]
    require_native()
    env.pop("CLAIMGRAPH_PURE")
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["native", "ClaimMap", "EdgeMap"]


def test_ids_round_trip_whatever_their_shape() -> None:
    """Claim ids that are canonical UUIDs are stored as 16 bytes, others as text: every id
    reads back as given, is found by itself only, and near-UUIDs stay distinct."""
    require_native()
    ids = [
        "0f8fad5b-d9cb-469f-a165-70867728950e",  # canonical: compacted
        "0F8FAD5B-D9CB-469F-A165-70867728950E",  # upper case: text (a different id)
        "0f8fad5bd9cb469fa16570867728950e",  # no hyphens: text
        "0f8fad5b-d9cb-469f-a165-70867728950g",  # not hex: text
        "0f8fad5b-d9cb-469f-a165-70867728950",  # 35 characters: text
        "{0f8fad5b-d9cb-469f-a165-70867728950e}",
        "c-1",
        "ü-ünïcødé-✓",
    ]
    state = GraphState(GRAPH)
    key = "runs_in\x1fsvc\x1fs\x1fenv\x1fe"
    for n, cid in enumerate(ids):
        state.claims[cid] = ClaimState(key, "w1", True, n, 1, None, 0.5, None)
    state.edges[key] = EdgeState()
    state.edges[key].visible = tuple(ids)
    assert list(state.claims) == ids
    assert [state.claims[c].ts for c in ids] == list(range(len(ids)))
    assert state.edges[key].visible == tuple(ids)
    assert "0f8fad5b-d9cb-469f-a165-70867728950f" not in state.claims
    assert state.claims.get("0f8fad5b-d9cb-469f-a165-70867728950f") is None
    dicts = GraphState(GRAPH, native_tables=False)
    for n, cid in enumerate(ids):
        dicts.claims[cid] = ClaimState(key, "w1", True, n, 1, None, 0.5, None)
    dicts.edges[key] = EdgeState()
    dicts.edges[key].visible = tuple(ids)
    assert state_digest(state) == state_digest(dicts)
