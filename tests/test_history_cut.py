"""A history after GC says where it was cut, on every surface: the embedded graph, the HTTP
API and its SDK, the CLI and a run's replay (a cut answer never looks whole)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from claimgraph.cli.main import app as cli
from claimgraph.projections.retention import gc_graph
from claimgraph.service.graph import Graph
from tests.http_fixtures import SdkFactory, sdk  # noqa: F401  (the fixture)

EDGE = ("runs_in", "service:api", "environment:e0")
NEW = ("runs_in", "service:api", "environment:e9")


def _busy(g: Graph, n: int = 12) -> None:
    for i in range(n):
        g.assert_(
            "runs_in", "service:api", f"environment:e{i % 3}", agent="release", task="promote"
        )


def test_history_after_gc_names_the_version_it_was_cut_at(
    sdk: tuple[SdkFactory, Graph],  # noqa: F811
) -> None:
    """Embedded and over HTTP: the cut history says ``cut_below`` = the horizon; one whose
    edge began above the horizon is whole (``cut_below`` None), and so is any before GC."""
    as_agent, g = sdk
    _busy(g)
    client = as_agent("tracer")
    whole = client.history(*EDGE)
    assert whole.cut_below is None and not whole.cut and len(whole) >= 4
    rep = gc_graph(g, keep=3)
    assert rep.horizon > 0
    g.assert_(*NEW, agent="release", task="promote")
    cut = client.history(*EDGE)
    assert cut.cut and cut.cut_below == rep.horizon
    assert [e["version"] for e in cut] == [
        e["version"] for e in whole if e["version"] >= rep.horizon
    ]
    assert cut.as_dict()["cut_below"] == rep.horizon
    fresh = client.history(*NEW)
    assert fresh.cut_below is None and len(fresh) == 1


def test_cli_history_says_it_was_cut(tmp_path: Path) -> None:
    """``claimgraph history`` prints the cut, and ``--json`` carries ``cut_below``."""
    import claimgraph
    from tests.conftest import SCHEMA

    data = tmp_path / "g"
    with claimgraph.open(data, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        _busy(g)
        horizon = gc_graph(g, keep=3).horizon
    base = ["--data", str(data), "history", *EDGE]
    text = CliRunner().invoke(cli, base)
    assert text.exit_code == 0, text.output
    assert f"entries below version {horizon} were removed by gc" in text.output
    out = CliRunner().invoke(cli, [*base, "--json"])
    assert out.exit_code == 0, out.output
    got: dict[str, Any] = json.loads(out.output)
    assert got["cut_below"] == horizon and got["history"]


def test_a_run_replayed_after_gc_says_its_history_was_cut(tmp_path: Path) -> None:
    """A run's history read recorded whole replays as a difference once GC cut it (the cut is
    in what the trace digests); before any cut the digest is the entries' as it always was."""
    import claimgraph
    from claimgraph.service.traces import digest
    from tests.conftest import SCHEMA

    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        _busy(g)
        with g.run(agent="tracer") as run:
            h = run.history(*EDGE)
        assert digest(h) == digest(list(h.entries))
        assert g.replay_run(run.run_id).identical
        gc_graph(g, horizon=g.head())
        report = g.replay_run(run.run_id)
        assert not report.identical and report.first_difference is not None
        assert report.first_difference["query"]["op"] == "history"
