"""Fail closed for disagreement, by every route, and agents that change their mind.

In a fail-closed domain, while writers disagree about a decision slot, readers get the safe
value and only a human (principals.humans) settles the disagreement away from it — through a
resolve, a merge, last-write-wins or another writer's denial of the safe value, which is not
itself safe. A claim nobody disputes is decided as in any domain (rules revision 4; under
revision 2 every move off the safe value waited for a person). A writer's new claim replaces
its own claim inside a conflict, and a conflict whose remaining claims all agree settles
itself. The schema is a data file; the table of cases is DESIGN §2's.
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
    assert first.kind == "accepted"  # revision 4: nobody disputes it (the table below)
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


# -- the table of cases (rules revision 4), under each conflict policy -------------------------

POLICIES = ("by_quarantine", "by_lww", "by_merge")
REJECT, APPROVE = "verdict:REJECT", "verdict:APPROVE"


def _read(g: Graph, et: str) -> tuple[str, tuple[tuple[str, str], ...], str | None, str | None]:
    """The slot read and the edge reads of its two verdicts agree; (state, nodes, fallback,
    conflict) of the slot."""
    s = g.slot(et, "refund:R1")
    for verdict in (REJECT, APPROVE):
        e = g.edge(et, "refund:R1", verdict)
        if s.state == "unknown":
            assert e.state in ("unknown", "absent") and e.fallback in (None, s.fallback)
        else:
            assert e.state == ("present" if tuple(verdict.split(":")) in s.nodes else "absent")
    return s.state, s.nodes, s.fallback, s.conflict_id


def _dispute(g: Graph, et: str) -> tuple[str, str, str]:
    """A asserts REJECT, then B asserts APPROVE: (A's claim, B's claim, the conflict)."""
    a = g.assert_(et, "refund:R1", REJECT, agent="A", asserted_at=1000, confidence=0.5)
    b = g.assert_(et, "refund:R1", APPROVE, agent="B", asserted_at=2000, confidence=0.5)
    assert b.kind == "quarantined", b.decision
    cf = b.decision["conflict_id"]
    assert cf is not None
    assert _read(g, et) == ("unknown", (), "REJECT", cf)  # the safe value, with the conflict
    return a.command_id, b.command_id, cf


@pytest.mark.parametrize("et", POLICIES)
def test_a_first_approval_nobody_disputes_is_accepted(g: Graph, et: str) -> None:
    """A bot's first APPROVE, nobody disputing: accepted; readers get APPROVE."""
    r = g.assert_(et, "refund:R1", APPROVE, agent="bot")
    assert (r.kind, r.reason) == ("accepted", "new")
    assert _read(g, et)[:2] == ("present", (("verdict", "APPROVE"),))


@pytest.mark.parametrize("et", POLICIES)
def test_a_bot_resolver_may_not_settle_a_dispute_on_approve(g: Graph, et: str) -> None:
    """A: REJECT, B: APPROVE, then a bot resolver picks APPROVE: refused, readers get REJECT."""
    _, b, cf = _dispute(g, et)
    r = g.resolve(cf, agent="resolver-bot", winner=b)
    assert (r.kind, r.reason) == ("rejected", "needs_human")
    assert _read(g, et) == ("unknown", (), "REJECT", cf)


@pytest.mark.parametrize("et", ["by_lww", "by_merge"])
def test_another_writers_win_over_the_safe_claim_is_held_for_a_human(g: Graph, et: str) -> None:
    """Last-write-wins (newer) or a merge (stronger) by another writer over A's REJECT: held
    for a human; readers get REJECT."""
    g.assert_(et, "refund:R1", REJECT, agent="A", asserted_at=1000, confidence=0.3)
    r = g.assert_(et, "refund:R1", APPROVE, agent="B", asserted_at=2000, confidence=0.9)
    assert (r.kind, r.reason) == ("quarantined", "needs_human")
    assert _read(g, et)[:3] == ("unknown", (), "REJECT")


@pytest.mark.parametrize("et", POLICIES)
def test_another_writers_denial_of_the_safe_value_is_held(g: Graph, et: str) -> None:
    """A: REJECT, then B denies A's REJECT: held; readers get REJECT."""
    g.assert_(et, "refund:R1", REJECT, agent="A", asserted_at=1000)
    r = g.deny(et, "refund:R1", REJECT, agent="B", asserted_at=2000)
    assert r.kind == "quarantined"
    assert _read(g, et)[:3] == ("unknown", (), "REJECT")


@pytest.mark.parametrize("et", POLICIES)
def test_the_safe_writer_retracting_settles_the_dispute(g: Graph, et: str) -> None:
    """A retracts its REJECT: the conflict settles (recorded) and APPROVE is released."""
    a, b, cf = _dispute(g, et)
    r = g.retract(a, agent="A", reason="wrong refund")
    assert r.kind == "retired" and r.decision["released"] == [b]
    assert _read(g, et)[:2] == ("present", (("verdict", "APPROVE"),))
    row = g.conflict(cf)
    assert row is not None and not row["open"]


@pytest.mark.parametrize("et", POLICIES)
def test_the_safe_writer_changing_its_mind_settles_the_dispute(g: Graph, et: str) -> None:
    """A changes its mind to APPROVE: the conflict settles, A's REJECT superseded."""
    a, b, cf = _dispute(g, et)
    r = g.assert_(et, "refund:R1", APPROVE, agent="A", asserted_at=3000)
    assert (r.kind, r.reason) == ("accepted", "conflict_settled")
    assert a in r.decision["supersedes"] and r.decision["released"] == [b]
    assert _read(g, et)[:2] == ("present", (("verdict", "APPROVE"),))
    row = g.conflict(cf)
    assert row is not None and row["outcome"] == "settled"


@pytest.mark.parametrize("et", POLICIES)
def test_a_proven_human_settles_the_dispute_on_approve(g: Graph, et: str) -> None:
    """A human resolves to APPROVE: resolved; readers get APPROVE."""
    _, b, cf = _dispute(g, et)
    r = g.resolve(cf, agent="human:ann", winner=b)
    assert r.kind == "resolved"
    assert _read(g, et)[:2] == ("present", (("verdict", "APPROVE"),))


@pytest.mark.parametrize("et", POLICIES)
def test_an_owner_withdrawing_its_own_safe_claim_leaves_the_slot_absent(g: Graph, et: str) -> None:
    """A: REJECT, then A denies its own REJECT, nobody else: A's REJECT is withdrawn; the slot
    read and the edge read both say absent (no conflict, no fallback)."""
    a = g.assert_(et, "refund:R1", REJECT, agent="A", asserted_at=1000)
    r = g.deny(et, "refund:R1", REJECT, agent="A", asserted_at=2000)
    assert (r.kind, r.decision["supersedes"]) == ("accepted", [a.command_id])
    assert _read(g, et) == ("absent", (), None, None)
    assert g.edge(et, "refund:R1", REJECT).state == "absent"
    assert [c["conflict_id"] for c in g.quarantine()] == []


def test_revision_2_still_holds_every_move_off_the_safe_value(tmp_path: Path) -> None:
    """A graph under revision 2 keeps its rule (frozen): a bot's first APPROVE waits for a
    person, and the reads of its slot agree (unknown, REJECT, on the slot and the edge)."""
    from tests.legacy import restore

    path = restore(tmp_path / "g", "inventory")
    with claimgraph.open(path) as g2:
        assert g2.upgrade_rules(2, agent="platform-admin").kind == "accepted"
        doc = SCHEMA.replace("admins: [payments-admin]", "admins: [payments-admin, platform-admin]")
        assert g2.publish_schema(doc, agent="platform-admin").kind == "accepted"
        r = g2.assert_("by_lww", "refund:R1", APPROVE, agent="bot", asserted_at=5)
        assert (r.decision["rules"], r.reason) == (2, "needs_human")
        a = g2.assert_("by_quarantine", "refund:R1", REJECT, agent="A", asserted_at=6)
        d = g2.deny("by_quarantine", "refund:R1", REJECT, agent="A", asserted_at=7)
        assert (d.reason, d.decision["supersedes"]) == ("needs_human", [a.command_id])
        assert _read(g2, "by_quarantine")[:3] == ("unknown", (), "REJECT")  # one answer
        verify(g2)


# -- conflicts that meet merge (rules revision 4) -------------------------------------------


def test_a_claim_touching_two_conflicts_merges_them_under_the_older(tmp_path: Path) -> None:
    """A one-to-one edge: conflict X on a team's slot, then Y on a service's; a claim touching
    both joins X, Y closes as merged into X (recorded); a resolve naming Y is rejected naming
    X; resolving X settles every claim of both."""
    from tests.conftest import SCHEMA as BASE

    with claimgraph.open(tmp_path / "g", create=True, graph="t") as g:
        g.publish_schema(BASE, agent="admin")
        g.assert_("lead_of", "team:t1", "service:s1", agent="a", task="org")
        x = g.assert_("lead_of", "team:t1", "service:s2", agent="b", task="org")
        g.assert_("lead_of", "team:t2", "service:s3", agent="a", task="org")
        y = g.assert_("lead_of", "team:t3", "service:s3", agent="b", task="org")
        cx, cy = x.decision["conflict_id"], y.decision["conflict_id"]
        assert cx and cy and cx != cy
        r = g.assert_("lead_of", "team:t1", "service:s3", agent="c", task="org")
        assert (r.kind, r.reason, r.decision["conflict_id"]) == (
            "quarantined",
            "joins_conflict",
            cx,
        )
        assert r.decision["exits"] == [
            {
                "conflict_id": cy,
                "trigger": "merged",
                "action": "merge",
                "detail": f"merged into {cx}",
            }
        ]
        rows = {c["conflict_id"]: c for c in g.quarantine(include_closed=True)}
        assert rows[cy]["outcome"] == f"merged into {cx}" and not rows[cy]["open"]
        assert len(rows[cx]["claims"]) == 5 and rows[cx]["open"]
        bad = g.resolve(cy, agent="reviewer", winner=y.command_id)
        assert (bad.reason, bad.decision["detail"]) == (
            "conflict_closed",
            f"conflict {cy!r} was merged into {cx!r}: name {cx!r}",
        )
        ok = g.resolve(cx, agent="reviewer", winner=r.command_id)
        assert ok.kind == "resolved"
        assert g.slot("lead_of", "team:t1").nodes == (("service", "s3"),)
        assert g.quarantine() == []
        verify(g)
        audit(g, samples=2)
