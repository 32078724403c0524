"""The native tables' spill: claims beyond what memory keeps go to a scratch RocksDB.

A graph whose claims do not fit the configured memory still runs, decides and folds exactly
as the Python core does (the property streams also run with a tiny spill: see
``tests/test_native_core.py`` and ``tests/test_native_rows.py``).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.governor import decide as python_decide
from claimgraph.core.snapshot import decode_state, encode_state, state_digest
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_decision
from claimgraph.native import spill
from claimgraph.service.audit import audit, verify
from tests.native_support import require_native, tiny_spill
from tests.strategies import GRAPH, claim, retract, stream_of
from tests.test_fold_memory import SCHEMA


def _commands() -> list[dict[str, Any]]:
    out = []
    for i in range(60):  # svc i moves between envs (supersedes, LWW conflicts), peers many-to-many
        out.append(claim(f"c{i}", f"runs_in svc:s{i % 10} env:e{i % 3}", "w1", at=i))
        out.append(claim(f"p{i}", f"peer svc:s{i} svc:s{i + 1}", "w2", at=i))
        out.append(claim(f"old{i}", f"runs_in svc:s{i % 10} env:e{(i + 1) % 3}", "w2", at=0))
    out += [retract(f"r{i}", f"p{i}", "w2") for i in range(0, 60, 7)]
    return out


def test_an_embedded_graph_runs_with_its_claims_spilled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep 2 claims in memory: the runtime decides, folds and projects ~200 commands with the
    rest spilled; ``verify`` and ``audit`` (the Python core) agree, the folded state is the
    Python core's, a checkpoint-style encode/decode round-trips through the spill, and the
    spill's directory is removed with its tables."""
    require_native()
    monkeypatch.setenv("CLAIMGRAPH_STATE_SPILL_DIR", str(tmp_path))
    s = stream_of(SCHEMA, _commands())
    with tiny_spill():
        g = claimgraph.open(tmp_path / "g", create=True, graph=GRAPH)
        try:
            g.append(list(s.records))
            assert g.process() == len(s.records)
            assert verify(g).decisions == len(s.records)
            audit(g)
            runtime = g._runtime
            assert runtime is not None
            state = runtime.state
            store = state.claims.store
            assert store.spilled() >= len(state.claims) - 4
            assert store.spilled_edges() >= len(state.edges) - 4
            py = GraphState(GRAPH, native_tables=False)
            logged = g.logs.decisions.read(0, len(s.records))
            for i, rec in enumerate(g.logs.commands.read(0, len(s.records))):
                d = python_decide(py, rec.value, rec.offset, rec.timestamp)
                assert encode_decision(d) == logged[i].value
                py.evolve(d, i, logged[i].value)
            assert state_digest(state) == state_digest(py)
            loaded = decode_state(encode_state(state))  # a checkpoint load, into spilled tables
            assert loaded.claims.store.spilled() > 0
            assert state_digest(loaded) == state_digest(py)
            spill_dirs = list(tmp_path.glob("claimgraph-state-*"))
            assert spill_dirs
        finally:
            g.close()
    del g, runtime, state, store, loaded
    gc.collect()
    assert not [p for p in spill_dirs if p.exists()], "a spill directory outlived its tables"


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_a_bad_spill_setting_is_named(value: str) -> None:
    """``CLAIMGRAPH_STATE_CLAIMS`` must be a whole number >= 1: anything else is an error that
    names the variable, never a silent default."""
    require_native()
    probe = (
        "import claimgraph.native; from claimgraph.core.state import GraphState; GraphState('g')"
    )
    env = {**os.environ, "CLAIMGRAPH_STATE_CLAIMS": value}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "CLAIMGRAPH_STATE_CLAIMS" in out.stderr


def test_the_setting_rounds_up_to_chunks() -> None:
    """Claims kept in memory are whole chunks of 65,536 (at least one)."""
    assert spill.SpillConfig(1).keep == 1
    assert spill.SpillConfig(65_536).keep == 1
    assert spill.SpillConfig(65_537).keep == 2
    assert spill.SpillConfig(1_000_000).keep == 16


def test_many_chunks_spill_and_every_entry_is_found(tmp_path: Path) -> None:
    """5,000 claims and edges in chunks of 16, 3 chunks of each kept: the index drops the
    spilled entries (tombstones, rebuilt as they fill it) and every claim and edge is still
    found, read and changed exactly as in Python dicts, new or old."""
    from claimgraph.core.state import ClaimState, EdgeState

    require_native()
    before = spill.configured()
    spill.configure(spill.SpillConfig(48, chunk_bits=4))
    try:
        tables = GraphState(GRAPH)
    finally:
        spill.configure(before)
    dicts = GraphState(GRAPH, native_tables=False)
    n = 5000
    for st in (tables, dicts):
        for i in range(n):
            key = f"runs_in\x1fsvc\x1fs{i}\x1fenv\x1fe{i % 7}"
            st.claims[f"c{i}"] = ClaimState(key, f"w{i % 5}", i % 3 != 0, i, 1, None, 0.5, i)
            st.edges[key] = EdgeState()
            st.edges[key].visible = (f"c{i}",)
        for i in range(0, n, 37):  # old and new entries change: written back from the cold cache
            st.claims[f"c{i}"].status = 4
            st.edges[st.claims[f"c{i}"].edge].visible = ()
            st.edges[st.claims[f"c{i}"].edge].changed = i
    store = tables.claims.store
    assert store.spilled() >= n - 64 and store.spilled_edges() >= n - 64
    for i in range(0, n, 13):
        c, d = tables.claims[f"c{i}"], dicts.claims[f"c{i}"]
        assert (c.edge, c.agent, c.asserts, c.ts, c.status, c.based) == (
            d.edge, d.agent, d.asserts, d.ts, d.status, d.based,
        )  # fmt: skip
        assert tables.edges[c.edge].visible == dicts.edges[d.edge].visible
    assert f"c{n}" not in tables.claims and "runs_in\x1fnope" not in tables.edges
    assert state_digest(tables) == state_digest(dicts)
