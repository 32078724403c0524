"""Queries beyond one hop (paths, reach, filtered neighbors) at a version, embedded and HTTP;
reads of what the schema does not define are errors, old traces replay as recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.errors import InputError
from claimgraph.http.app import create_app
from claimgraph.service.traces import replay
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


@pytest.fixture(params=["embedded", "http"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A graph a→b→c→d (depends_on), a→c (calls), b→d quarantined; (reader, receipts)."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    inv = {"agent": "inventory"}
    rs = {
        "ab": g.assert_("depends_on", "service:a", "service:b", confidence=0.9, **inv),
        "bc": g.assert_("depends_on", "service:b", "service:c", confidence=0.4, **inv),
        "cd": g.assert_("depends_on", "service:c", "service:d", **inv),
        "ac": g.assert_("calls", "service:a", "service:c", agent="tracer"),
        "bd": g.assert_("depends_on", "service:b", "service:d", **inv),
    }
    rs["bd-deny"] = g.deny("depends_on", "service:b", "service:d", agent="tracer")
    assert rs["bd-deny"].kind == "quarantined"
    if request.param == "embedded":
        yield g, rs
    else:
        c = claimgraph.connect(
            "http://t", token=TOKENS["inventory"], app=create_app(g, token_file())
        )
        yield c, rs
        c.close()
    g.close()


def test_paths_shortest_first_with_unknown_edges_named(world: tuple[Any, dict[str, Any]]) -> None:
    """paths lists simple paths shortest first; one through a quarantined edge is unknown."""
    g, rs = world
    res = g.paths("service:a", "service:d", max_hops=3)
    shapes = [([h.object[1] for h in p.hops], p.state) for p in res.paths]
    assert shapes == [
        (["c", "d"], "present"),
        (["b", "d"], "unknown"),
        (["b", "c", "d"], "present"),
    ]
    conflict = rs["bd-deny"].decision["conflict_id"]
    assert res.paths[1].conflicts == (conflict,)
    assert [(h.subject[1], h.object[1], h.conflict_id) for h in res.unknown] == [
        ("b", "d", conflict)
    ]
    only = g.paths("service:a", "service:d", max_hops=3, edge_types=["depends_on"], limit=1)
    assert [len(p.hops) for p in only.paths] == [2] and only.truncated_by == "limit"
    before = g.paths("service:a", "service:d", at=rs["cd"].version)
    assert [len(p.hops) for p in before.paths] == [3] and before.unknown == ()


def test_reach_marks_nodes_behind_unknown_edges(world: tuple[Any, dict[str, Any]]) -> None:
    """reach lists nodes nearest first; certain only via present edges."""
    g, _ = world
    res = g.reach("service:b", max_hops=1)
    assert [(r.node[1], r.hops, r.certain) for r in res.nodes] == [
        ("c", 1, True),
        ("d", 1, False),
    ]
    # d is reachable for sure only through c (two hops): then it is certain, hops kept
    assert [(r.node[1], r.hops, r.certain) for r in g.reach("service:b").nodes] == [
        ("c", 1, True),
        ("d", 1, True),
    ]
    res3 = g.reach("service:a", max_hops=3, edge_types=["depends_on"])
    assert {r.node[1]: r.certain for r in res3.nodes} == {"b": True, "c": True, "d": True}
    back = g.reach("service:d", direction="in", max_hops=1)
    assert sorted((r.node[1], r.certain) for r in back.nodes) == [("b", False), ("c", True)]
    with pytest.raises(InputError):
        g.reach("service:a", max_hops=7)


def test_neighbors_filtered_by_claims(world: tuple[Any, dict[str, Any]]) -> None:
    """neighbors keeps edges one of whose claims passes min_confidence, writer, time."""
    g, rs = world
    assert [n.node[1] for n in g.neighbors("service:b", min_confidence=0.5)] == ["d"]
    assert [n.node[1] for n in g.neighbors("service:a", writer="tracer")] == ["c"]
    t = g.claim_info(rs["ab"].command_id)["asserted_at"]
    after = g.neighbors("service:a", asserted_after=t)
    assert [n.edge_type for n in after] == ["calls"]
    assert [n.node[1] for n in g.neighbors("service:a", asserted_before=t + 1)] == ["b"]


def test_undefined_edge_types_and_slot_sides_are_errors(world: tuple[Any, dict[str, Any]]) -> None:
    """An edge type or slot side the schema lacks is an error naming the schema."""
    g, _ = world
    with pytest.raises(InputError, match=r"not defined by the graph schema.*revision 1"):
        g.edge("dependz_on", "service:a", "service:b")
    with pytest.raises(InputError, match="no slot on the subject side"):
        g.slot("depends_on", "service:a")
    with pytest.raises(InputError, match="not defined"):
        g.paths("service:a", "service:b", edge_types=["nope"])
    assert g.edge("depends_on", "service:a", "service:b", at=-1).state == "absent"


def test_runs_trace_queries_and_replay_them(world: tuple[Any, dict[str, Any]]) -> None:
    """paths, reach and filtered neighbors are traced reads that replay identically."""
    g, _ = world
    with g.run(agent="inventory", task="audit") as run:
        assert len(run.paths("service:a", "service:d").paths) == 3
        assert run.reach("service:a", max_hops=1).nodes
        assert run.neighbors("service:b", min_confidence=0.5)
    ops = [json.loads(e["payload"])["query"]["op"] for e in g.run_events(run.run_id)[1:-1]]
    assert ops == ["paths", "reach", "neighbors"]
    assert g.replay_run(run.run_id).identical


def test_old_traces_keep_their_recorded_meaning(tmp_path: Path) -> None:
    """A trace recorded before undefined types became errors replays as absent."""
    with claimgraph.open(tmp_path / "g", create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
        with g.lenient_reads():
            old = g.edge("nope", "service:a", "service:b")
        assert old.state == "absent"
        with g.run(agent="inventory") as run:
            run.edge("depends_on", "service:a", "service:b")
        events = g.run_events(run.run_id)
        start = json.loads(events[0]["payload"])
        assert start["reads"] == 2
        legacy = [dict(e) for e in events]
        legacy[0]["payload"] = json.dumps({"snapshot": None})  # as recorded before
        legacy[1]["payload"] = json.dumps(
            {
                "query": {
                    "op": "edge",
                    "args": {"edge_type": "nope", "subject": ["service", "a"],
                             "object": ["service", "b"]},
                },
                "digest": __import__("claimgraph.service.traces").service.traces.digest(old),
            }
        )  # fmt: skip
        assert replay(g, legacy).identical
        legacy[0]["payload"] = json.dumps({"snapshot": None, "reads": 2})
        assert not replay(g, legacy).identical  # under the new meaning it is an error
