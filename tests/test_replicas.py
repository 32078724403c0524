"""Read replicas: processes that open the projection as a RocksDB secondary serve reads at any
version while the primary keeps writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import claimgraph
from claimgraph.errors import ConfigError, VersionNotYetAvailable, VersionPruned
from claimgraph.projections.retention import gc_graph
from claimgraph.service.graph import Graph
from claimgraph.service.replica import open_replica
from tests.conftest import ROOT, SCHEMA
from tests.replica_worker import answers


def _write(g: Graph, start: int, n: int) -> None:
    for i in range(start, start + n):
        g.assert_("runs_in", f"service:s{i % 5}", f"environment:e{i % 3}", agent="release",
                  task="promote")  # fmt: skip
        g.assert_("depends_on", f"service:s{i % 5}", f"service:t{i % 9}", agent="inventory")


def test_two_replica_processes_read_a_fixed_version_while_the_primary_writes(
    tmp_path: Path,
) -> None:
    """Two replica processes read version V while the primary writes on: their answers at V
    never change, equal the primary's, and their head follows the primary's."""
    path = tmp_path / "g"
    g = claimgraph.open(path, create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    _write(g, 0, 40)
    fixed = g.head()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.replica_worker", str(path), str(fixed), "4"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        i = 40
        while any(p.poll() is None for p in procs):
            _write(g, i, 5)  # the primary keeps writing (and changes what head reads)
            i += 5
        results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
        want = json.loads(json.dumps(answers(g, fixed)))
        for res in results:
            assert res["same"] and res["rounds"] > 3
            assert res["first"] == want
            assert res["heads"][-1] > res["heads"][0] >= fixed  # it saw the new versions
        assert answers(g, g.head()) != answers(g, fixed)  # the writes did change the graph
    finally:
        for p in procs:
            p.kill() if p.poll() is None else None
        g.close()


def test_replica_honours_at_wait_and_horizon(tmp_path: Path) -> None:
    """A replica reports its head, waits for a version it has not seen, and refuses pruned
    versions once it caught up with a GC."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    try:
        g.publish_schema(SCHEMA, agent="admin")
        _write(g, 0, 10)
        with open_replica(tmp_path / "g") as r:
            assert r.head() == g.head() and r.name == "test"
            v = g.head()
            with pytest.raises(VersionNotYetAvailable):
                r.edge("runs_in", "service:s1", "environment:e1", at=v + 1, timeout=0.2)
            _write(g, 10, 1)
            got = r.edge("runs_in", "service:s1", "environment:e1", at=v + 1, timeout=5)
            assert got == g.edge("runs_in", "service:s1", "environment:e1", at=v + 1)
            h = gc_graph(g, keep=3).horizon
            r.catch_up()
            assert r.horizon() == h and r.status()["horizon"] == h
            with pytest.raises(VersionPruned):
                r.edge("runs_in", "service:s1", "environment:e1", at=h - 1)
    finally:
        g.close()
    with pytest.raises(ConfigError, match="not a claimgraph"):
        open_replica(tmp_path)
