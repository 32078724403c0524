"""Export a version (jsonl, graphml, parquet) and to_networkx, with claim provenance."""

from __future__ import annotations

import io
import json
from pathlib import Path

import networkx as nx
import pyarrow.parquet as pq
from typer.testing import CliRunner

from claimgraph.cli.main import app
from claimgraph.service.export import export
from claimgraph.service.graph import Graph


def _world(graph: Graph) -> dict[str, int]:
    a = graph.assert_(
        "depends_on", "service:a", "service:b", agent="inventory", task="t1", confidence=0.7,
        evidence=["trace#1"],
    )  # fmt: skip
    graph.assert_("depends_on", "service:a", "service:b", agent="tracer", confidence=0.9)
    q = graph.deny("calls", "service:b", "service:c", agent="tracer")
    graph.assert_("owns", "service:a", "database:d", agent="inventory")
    d = graph.deny("owns", "service:a", "database:d", agent="dba", task="audit-x")
    later = graph.retract(a.command_id, agent="inventory")
    return {
        "first": a.version,
        "quarantined": d.version,
        "retracted": later.version,
        "q": q.version,
    }


def test_to_networkx_at_a_version_carries_provenance(graph: Graph) -> None:
    """Each edge has owner, task, confidence, evidence and decision version; unknown ones too."""
    v = _world(graph)
    g = graph.to_networkx(at=v["quarantined"])
    assert g.graph["version"] == v["quarantined"]
    dep = g.edges["service:a", "service:b", "depends_on"]
    assert dep["state"] == "present" and dep["owners"] == "inventory,tracer"
    by_agent = {c["agent"]: c for c in dep["claim_records"]}
    assert by_agent["inventory"]["task"] == "t1"
    assert by_agent["inventory"]["evidence"] == ["trace#1"]
    assert by_agent["inventory"]["confidence"] == 0.7
    assert by_agent["inventory"]["decision_version"] == v["first"]
    owns = g.edges["service:a", "database:d", "owns"]
    assert owns["state"] == "unknown" and owns["conflict_id"]
    assert {c["agent"] for c in owns["claim_records"]} == {"inventory", "dba"}
    assert g.nodes["database:d"] == {"type": "database", "id": "d"}
    # after the retraction only the tracer's claim holds the edge
    after = graph.to_networkx(at=v["retracted"])
    assert after.edges["service:a", "service:b", "depends_on"]["owners"] == "tracer"
    assert graph.to_networkx(at=v["first"] - 1).number_of_edges() == 0


def test_jsonl_graphml_and_parquet_agree(graph: Graph, tmp_path: Path) -> None:
    """The three formats hold the same edges and provenance at the same version."""
    v = _world(graph)["quarantined"]
    buf = io.StringIO()
    n = export(graph, "jsonl", buf, v)
    rows = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert n == len(rows) == 2
    export(graph, "graphml", tmp_path / "g.graphml", v)
    gm = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    assert gm.number_of_edges() == 2
    export(graph, "parquet", tmp_path / "g.parquet", v)
    table = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [(r["edge_type"], r["state"]) for r in table] == [
        (r["edge_type"], r["state"]) for r in rows
    ]
    assert table[0]["claims"] == rows[0]["claims"]


def test_export_from_the_cli(graph: Graph) -> None:
    """claimgraph export --at V --format jsonl prints one edge per line."""
    v = _world(graph)["quarantined"]
    data = str(graph.path)
    graph.close()
    r = CliRunner().invoke(app, ["--data", data, "export", "--at", str(v), "--format", "jsonl"])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert {x["edge_type"] for x in lines} == {"depends_on", "owns"}
