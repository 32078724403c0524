"""Fail closed by every route, and agents that change their mind (issue 11.4, 11.5).

In a fail-closed domain only a human (principals.humans) moves a decision slot off its safe
value — through a resolve, a merge, last-write-wins or a denial of the safe value, which is
not itself safe. A writer's new claim replaces its own claim inside a conflict, and a
conflict whose remaining claims all agree settles itself. The schema is a data file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import claimgraph
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from tests.conftest import ROOT

SCHEMA = (ROOT / "tests" / "data" / "fail_closed.yaml").read_text()


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Graph]:
    graph = claimgraph.open(tmp_path / "g", create=True, graph="pay")
    assert graph.publish_schema(SCHEMA, agent="payments-admin").kind == "accepted"
    yield graph
    verify(graph)
    audit(graph, samples=2)
    graph.close()


def _nodes(g: Graph, et: str) -> tuple[tuple[str, str], ...]:
    return g.slot(et, "refund:R1").nodes


def test_a_bot_resolver_cannot_pick_a_denial_of_the_safe_value(g: Graph) -> None:
    """risk asserts REJECT, experience denies REJECT: a bot may not release the deny."""
    a = g.assert_("by_quarantine", "refund:R1", "verdict:REJECT", agent="risk")
    d = g.deny("by_quarantine", "refund:R1", "verdict:REJECT", agent="experience")
    conflict = d.decision["conflict_id"] or ""
    bot = g.resolve(conflict, agent="resolver-bot", winner=d.command_id)
    assert (bot.kind, bot.reason) == ("rejected", "needs_human")
    assert g.resolve(conflict, agent="resolver-bot", winner=a.command_id).kind == "resolved"
    assert _nodes(g, "by_quarantine") == (("verdict", "REJECT"),)


def test_a_human_may_move_the_slot(g: Graph) -> None:
    """The same verdict from a person is accepted, and the slot then reads as they chose."""
    g.assert_("by_quarantine", "refund:R1", "verdict:REJECT", agent="risk")
    d = g.deny("by_quarantine", "refund:R1", "verdict:REJECT", agent="experience")
    r = g.resolve(d.decision["conflict_id"] or "", agent="human:alice", winner=d.command_id)
    assert r.kind == "resolved"
    assert _nodes(g, "by_quarantine") == ()


def test_merge_does_not_accept_a_strong_denial_of_the_safe_value(g: Graph) -> None:
    """A 0.9 deny of REJECT against a 0.3 assert: the merge leader is unsafe, so it waits."""
    g.assert_("by_merge", "refund:R1", "verdict:REJECT", agent="risk", confidence=0.3)
    r = g.deny("by_merge", "refund:R1", "verdict:REJECT", agent="experience", confidence=0.9)
    assert (r.kind, r.reason) == ("quarantined", "needs_human")
    assert g.slot("by_merge", "refund:R1").state == "unknown"


def test_last_write_wins_does_not_let_a_bot_approve(g: Graph) -> None:
    """A bot's newer APPROVE does not supersede REJECT: it is held for a person."""
    g.assert_("by_lww", "refund:R1", "verdict:REJECT", agent="risk", asserted_at=1000)
    r = g.assert_("by_lww", "refund:R1", "verdict:APPROVE", agent="bot", asserted_at=2000)
    assert (r.kind, r.reason) == ("quarantined", "needs_human")
    view = g.slot("by_lww", "refund:R1")
    assert view.state == "unknown" and view.fallback == "REJECT"
    first = g.assert_("by_lww", "refund:R2", "verdict:APPROVE", agent="bot", asserted_at=3000)
    assert first.reason == "needs_human"  # an empty slot reads REJECT: approving moves it too
    ok = g.assert_("by_lww", "refund:R3", "verdict:APPROVE", agent="human:bob", asserted_at=9)
    assert ok.kind == "accepted"
    same = g.assert_("by_lww", "refund:R3", "verdict:APPROVE", agent="bot", asserted_at=10)
    assert same.kind == "accepted"  # corroborating what already holds moves nothing


def test_a_writer_that_changes_its_mind_settles_the_conflict(g: Graph) -> None:
    """inventory asserts, tracing denies (quarantined), tracing then asserts: settled."""
    a = g.assert_("depends_on", "refund:A", "refund:B", agent="inventory")
    d = g.deny("depends_on", "refund:A", "refund:B", agent="tracing")
    assert d.kind == "quarantined"
    conflict = d.decision["conflict_id"] or ""
    r = g.assert_("depends_on", "refund:A", "refund:B", agent="tracing")
    assert (r.kind, r.reason) == ("accepted", "conflict_settled")
    assert d.command_id in r.decision["supersedes"]
    assert r.decision["released"] == [a.command_id]
    assert g.edge("depends_on", "refund:A", "refund:B").state == "present"
    row = g.conflict(conflict)
    assert row is not None and not row["open"] and row["outcome"] == "settled"


def test_a_changed_mind_that_still_disagrees_replaces_its_old_claim(g: Graph) -> None:
    """Three writers disagree; one changes its claim: its old one leaves the conflict."""
    g.assert_("depends_on", "refund:A", "refund:B", agent="inventory")
    d1 = g.deny("depends_on", "refund:A", "refund:B", agent="tracing")
    d2 = g.deny("depends_on", "refund:A", "refund:B", agent="auditor")
    assert d2.reason == "joins_conflict"
    r = g.assert_("depends_on", "refund:A", "refund:B", agent="tracing")
    assert (r.kind, r.reason) == ("quarantined", "joins_conflict")
    assert d1.command_id in r.decision["supersedes"]
    row = g.conflict(d1.decision["conflict_id"] or "")
    assert row is not None and d1.command_id not in row["claims"] and row["open"]
    assert g.edge("depends_on", "refund:A", "refund:B").state == "unknown"


def test_schema_check_warns_where_a_domain_cannot_fail_closed(tmp_path: Path) -> None:
    """No humans, no exclusive slot, halt: `schema check` names each, and still exits 0."""
    import os
    import subprocess
    import sys

    weak = SCHEMA.replace('  humans: ["human:*"]\n', "").replace(
        "    cardinality: many-to-one\n    conflict_policy: quarantine\n    domain: refund",
        "    cardinality: many-to-many\n    on_unknown: halt\n    conflict_policy: quarantine\n"
        "    domain: refund",
    )
    path = tmp_path / "weak.yaml"
    path.write_text(weak)
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "schema", "check", str(path)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "by_quarantine cannot fail closed: its subject has no exclusive slot" in r.stderr
    assert "by_quarantine cannot fail closed: on_unknown: halt" in r.stderr
    assert "by_lww cannot fail closed: principals.humans is empty" in r.stderr
