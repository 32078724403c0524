"""The governor's policy, command by command, through the embedded graph."""

from __future__ import annotations

from pathlib import Path

import pytest

import claimgraph
from claimgraph.errors import InputError
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA

T0 = 1_800_000_000_000


def _runs(g: Graph, env: str, t: int, agent: str = "release", **kw: object) -> object:
    return g.assert_(
        "runs_in",
        "service:api",
        f"environment:{env}",
        agent=agent,
        task="promote",
        asserted_at=t,
        **kw,
    )


# -- authority -------------------------------------------------------------------------------


def test_writer_outside_schema_is_rejected_with_reason(graph: Graph) -> None:
    """An agent matching no writer is rejected as unauthorized and nothing is stored."""
    r = graph.assert_("owns", "service:a", "database:d", agent="release", task="promote")
    assert (r.kind, r.reason) == ("rejected", "unauthorized")
    assert "writers:" in r.decision["detail"]
    assert graph.edge("owns", "service:a", "database:d").state == "absent"


def test_writer_task_pattern_is_enforced(graph: Graph) -> None:
    """A known agent acting in a task its writer entry does not allow is rejected."""
    assert (
        graph.assert_("owns", "service:a", "database:d", agent="dba", task="audit-q4").kind
        == "accepted"
    )
    r = graph.assert_("owns", "service:b", "database:e", agent="dba", task="cleanup")
    assert r.reason == "unauthorized"


def test_grant_with_expiry_and_revoke(tmp_path: Path) -> None:
    """A grant admits a writer until its expiry (log time) or revocation; only admins grant."""
    now = [1_700_000_000_000]  # the log's append clock, moved by the test (no wall clock)
    graph = claimgraph.open(tmp_path / "g", create=True, graph="test", clock=lambda: now[0])
    graph.publish_schema(SCHEMA, agent="admin")
    assert graph.grant("intern", "depends_on", agent="inventory").reason == "not_admin"
    g1 = graph.grant("intern", "depends_on", agent="admin")
    assert g1.kind == "accepted"
    ok = graph.assert_("depends_on", "service:a", "service:b", agent="intern", task="x")
    assert ok.kind == "accepted"
    assert graph.revoke(g1.command_id, agent="admin").kind == "accepted"
    r = graph.assert_("depends_on", "service:a", "service:c", agent="intern", task="x")
    assert r.reason == "unauthorized"
    assert graph.revoke(g1.command_id, agent="admin").reason == "unknown_grant"
    # an expiry in the past of the log is refused; a near one admits until it lapses
    past = graph.grant("intern", "*", agent="admin", expires_at=1000)
    assert past.reason == "invalid_field"
    soon = graph.grant("intern", "*", agent="admin", expires_at=now[0] + 30)
    assert soon.kind == "accepted"
    now[0] += 29
    inside = graph.assert_("depends_on", "service:a", "service:e", agent="intern", task="x")
    assert inside.kind == "accepted"
    now[0] += 1  # the log time reaches the expiry
    late = graph.assert_("depends_on", "service:a", "service:d", agent="intern", task="x")
    assert late.reason == "unauthorized"
    graph.close()


def test_node_and_edge_types_are_checked(graph: Graph) -> None:
    """Unknown edge types, undeclared node types and wrong ends are rejected with codes."""
    r = graph.assert_("nope", "service:a", "database:d", agent="inventory")
    assert r.reason == "unknown_edge_type"
    r = graph.assert_("owns", "cluster:a", "database:d", agent="inventory")
    assert r.reason == "unknown_node_type"
    r = graph.assert_("owns", "team:a", "database:d", agent="inventory")
    assert r.reason == "subject_type_mismatch"
    r = graph.assert_("owns", "service:a", "team:d", agent="inventory")
    assert r.reason == "object_type_mismatch"


def test_claims_before_any_schema_are_rejected(empty_graph: Graph) -> None:
    """Without a published schema every claim is rejected as no_schema."""
    r = empty_graph.assert_("owns", "service:a", "database:d", agent="inventory")
    assert r.reason == "no_schema"


def test_first_schema_must_name_its_publisher_as_admin(empty_graph: Graph) -> None:
    """Bootstrap: the first schema is accepted only from one of its own admins."""
    from tests.conftest import SCHEMA

    assert empty_graph.publish_schema(SCHEMA, agent="mallory").reason == "not_admin"
    assert empty_graph.publish_schema(SCHEMA, agent="admin").kind == "accepted"
    assert empty_graph.publish_schema(SCHEMA, agent="mallory").reason == "not_admin"
    bad = empty_graph.publish_schema("node_types: 3", agent="admin")
    assert bad.reason == "invalid_schema"
    assert "node_types" in bad.decision["detail"]


def test_every_decision_names_the_schema_revision(graph: Graph) -> None:
    """Decisions carry the revision in force; a republish bumps it."""
    from tests.conftest import SCHEMA

    r1 = graph.assert_("depends_on", "service:a", "service:b", agent="inventory")
    assert r1.decision["schema_rev"] == 1
    graph.publish_schema(SCHEMA + "\n# v2\n", agent="admin")
    r2 = graph.assert_("depends_on", "service:a", "service:c", agent="inventory")
    assert r2.decision["schema_rev"] == 2


# -- last-write-wins --------------------------------------------------------------------------


def test_lww_newer_event_time_supersedes(graph: Graph) -> None:
    """A newer claim for an exclusive slot supersedes the holder; the old edge leaves head."""
    a = _runs(graph, "staging", T0)
    b = _runs(graph, "prod", T0 + 1000, agent="release-eu")
    assert (b.kind, b.reason) == ("accepted", "supersedes")
    assert b.decision["supersedes"] == [a.command_id]
    assert graph.edge("runs_in", "service:api", "environment:prod").state == "present"
    assert graph.edge("runs_in", "service:api", "environment:staging").state == "absent"
    assert (
        graph.edge("runs_in", "service:api", "environment:staging", at=a.version).state == "present"
    )


def test_lww_late_older_claim_is_recorded_and_loses(graph: Graph) -> None:
    """A late claim with an older event time is conflicted and never retires the newer."""
    _runs(graph, "staging", T0)
    new = _runs(graph, "prod", T0 + 1000)
    late = _runs(graph, "canary", T0 + 500, agent="release-us")
    assert (late.kind, late.reason) == ("conflicted", "older_than_current")
    assert late.decision["conflicts_with"] == [new.command_id]
    assert graph.slot("runs_in", "service:api").nodes == (("environment", "prod"),)
    info = graph.claim_info(late.command_id)
    assert info is not None and info["status"] == "lost"


def test_lww_ties_go_to_the_later_log_position(graph: Graph) -> None:
    """Equal event times: the claim later in the log wins."""
    _runs(graph, "staging", T0)
    r = _runs(graph, "prod", T0, agent="release-eu")
    assert r.reason == "supersedes"
    assert graph.slot("runs_in", "service:api").nodes == (("environment", "prod"),)


def test_lww_polarity_deny_newer_wins(graph: Graph) -> None:
    """On a many-to-many LWW edge a newer deny supersedes the assert; an older one loses."""
    a = graph.assert_("calls", "service:a", "service:b", agent="inventory", asserted_at=T0)
    old = graph.deny("calls", "service:a", "service:b", agent="tracer", asserted_at=T0 - 1)
    assert old.kind == "conflicted"
    d = graph.deny("calls", "service:a", "service:b", agent="tracer", asserted_at=T0 + 1)
    assert d.decision["supersedes"] == [a.command_id]
    assert graph.edge("calls", "service:a", "service:b").state == "absent"


# -- quarantine and resolution ---------------------------------------------------------------


def _dispute(g: Graph) -> tuple[str, str, str]:
    a = g.assert_("owns", "service:checkout", "database:orders", agent="inventory")
    b = g.assert_("owns", "service:payments", "database:orders", agent="dba", task="audit-1")
    assert (b.kind, b.reason) == ("quarantined", "slot_conflict")
    assert b.decision["withheld"] == [a.command_id]
    cid = b.decision["conflict_id"]
    assert cid is not None
    return a.command_id, b.command_id, cid


def test_quarantine_withholds_and_reads_unknown(graph: Graph) -> None:
    """Both claims are withheld; both edges and unrelated objects of the slot read unknown."""
    _, _, cid = _dispute(graph)
    for subj in ("service:checkout", "service:payments", "service:other"):
        e = graph.edge("owns", subj, "database:orders")
        assert (e.state, e.conflict_id) == ("unknown", cid)
    assert [c["conflict_id"] for c in graph.quarantine()] == [cid]
    ns = graph.neighbors("database:orders", direction="in")
    assert {n.state for n in ns} == {"unknown"}
    # before the conflict, checkout owned it
    assert (
        graph.edge("owns", "service:checkout", "database:orders", at=graph.head() - 1).state
        == "present"
    )


def test_new_claims_on_a_quarantined_slot_join_the_conflict(graph: Graph) -> None:
    """A third claim touching the held slot joins the open conflict."""
    _, _, cid = _dispute(graph)
    c = graph.assert_("owns", "service:search", "database:orders", agent="inventory")
    assert (c.kind, c.reason, c.decision["conflict_id"]) == ("quarantined", "joins_conflict", cid)


def test_resolve_releases_the_winner(graph: Graph) -> None:
    """A resolver's winner becomes visible; the loser is dismissed; the slot is known again."""
    a, b, cid = _dispute(graph)
    assert graph.resolve(cid, agent="inventory", winner=a).reason == "not_resolver"
    assert graph.resolve(cid, agent="reviewer", winner="zzz").reason == "not_in_conflict"
    r = graph.resolve(cid, agent="reviewer", winner=a, rationale="cmdb")
    assert (r.kind, r.decision["released"], r.decision["dismissed"]) == ("resolved", [a], [b])
    assert graph.edge("owns", "service:checkout", "database:orders").state == "present"
    assert graph.edge("owns", "service:payments", "database:orders").state == "absent"
    assert graph.quarantine() == []
    assert graph.resolve(cid, agent="reviewer", winner=a).reason == "conflict_closed"
    assert graph.resolve("cf:none", agent="reviewer", winner=a).reason == "unknown_conflict"


def test_resolve_reject_all(graph: Graph) -> None:
    """Rejecting every claim leaves the slot empty and known."""
    _, _, cid = _dispute(graph)
    r = graph.resolve(cid, agent="reviewer", winner=None)
    assert r.reason == "reject_all"
    assert graph.slot("owns", "database:orders", direction="in").state == "absent"


def test_polarity_conflict_on_many_to_many(graph: Graph) -> None:
    """A deny against another writer's assert quarantines the edge (many-to-many)."""
    a = graph.assert_("depends_on", "service:a", "service:b", agent="inventory")
    d = graph.deny("depends_on", "service:a", "service:b", agent="tracer")
    assert (d.kind, d.reason) == ("quarantined", "polarity_conflict")
    assert graph.edge("depends_on", "service:a", "service:b").state == "unknown"
    # unrelated edges of the same nodes are not affected (no slot)
    graph.assert_("depends_on", "service:a", "service:c", agent="inventory")
    assert graph.edge("depends_on", "service:a", "service:c").state == "present"
    graph.resolve(d.decision["conflict_id"] or "", agent="reviewer", winner=d.command_id)
    assert graph.edge("depends_on", "service:a", "service:b").state == "absent"
    info = graph.claim_info(a.command_id)
    assert info is not None and info["status"] == "dismissed"


def test_one_to_one_checks_both_slots(graph: Graph) -> None:
    """one-to-one: a second service for a team, or a second team for a service, conflicts."""
    assert (
        graph.assert_("lead_of", "team:web", "service:a", agent="hr", task="org").kind == "accepted"
    )
    r1 = graph.assert_("lead_of", "team:web", "service:b", agent="cto", task="org")
    assert r1.reason == "slot_conflict"
    r2 = graph.assert_("lead_of", "team:data", "service:a", agent="cto", task="org")
    assert r2.kind == "quarantined"


def test_same_agent_changing_its_mind_is_not_a_conflict(graph: Graph) -> None:
    """An agent's new claim replaces its own earlier one, even under quarantine."""
    a = graph.assert_("owns", "service:a", "database:d", agent="inventory")
    b = graph.assert_("owns", "service:b", "database:d", agent="inventory")
    assert (b.kind, b.decision["supersedes"]) == ("accepted", [a.command_id])


def test_corroboration_keeps_both_claims(graph: Graph) -> None:
    """Two writers asserting the same edge corroborate; it stays present until both retract."""
    a = graph.assert_("depends_on", "service:a", "service:b", agent="inventory")
    b = graph.assert_("depends_on", "service:a", "service:b", agent="tracer")
    assert b.reason == "corroborates"
    graph.retract(a.command_id, agent="inventory")
    assert graph.edge("depends_on", "service:a", "service:b").state == "present"
    graph.retract(b.command_id, agent="tracer")
    assert graph.edge("depends_on", "service:a", "service:b").state == "absent"


def test_confidence_weighted_merge_outvotes_a_weaker_claim(graph: Graph) -> None:
    """Under the merge policy a clearly weaker opposing claim loses and changes nothing."""
    a = graph.assert_("scored", "service:a", "team:x", agent="m1", confidence=0.9)
    r = graph.assert_("scored", "service:a", "team:y", agent="m2", confidence=0.4)
    assert (r.kind, r.reason) == ("conflicted", "outvoted")
    assert r.decision["merge"]["outcome"] == "assert team:x"
    assert r.decision["conflicts_with"] == [a.command_id]
    assert graph.edge("scored", "service:a", "team:x").state == "present"


# -- retraction -------------------------------------------------------------------------------


def test_retract_by_owner_only(graph: Graph) -> None:
    """Only the owner retracts; retirement leaves head but stays readable before."""
    a = graph.assert_("depends_on", "service:a", "service:b", agent="inventory")
    assert graph.retract(a.command_id, agent="tracer").reason == "not_owner"
    assert graph.retract("nope", agent="inventory").reason == "unknown_claim"
    r = graph.retract(a.command_id, agent="inventory")
    assert r.kind == "retired"
    assert graph.edge("depends_on", "service:a", "service:b").state == "absent"
    assert graph.edge("depends_on", "service:a", "service:b", at=r.version - 1).state == "present"
    assert graph.retract(a.command_id, agent="inventory").reason == "already_retired"
    hist = graph.history("depends_on", "service:a", "service:b")
    assert [h["kind"] for h in hist] == ["accepted", "retired"]


def test_retracting_a_held_claim_releases_the_remaining_one(graph: Graph) -> None:
    """When all but one outcome of a conflict is retracted, the rest is released."""
    a, b, cid = _dispute(graph)
    r = graph.retract(b, agent="dba")
    assert (r.decision["released"], r.decision["conflict_id"]) == ([a], cid)
    assert graph.edge("owns", "service:checkout", "database:orders").state == "present"
    assert graph.quarantine() == []


# -- stale claims -----------------------------------------------------------------------------


def test_stale_claim_rejected(graph: Graph) -> None:
    """on_stale: reject — a claim based on a version before the slot changed is rejected."""
    first = _runs(graph, "staging", T0)
    _runs(graph, "prod", T0 + 1)
    r = _runs(graph, "canary", T0 + 2, based_on_version=first.version)
    assert r.reason == "stale_claim"
    ok = _runs(graph, "canary", T0 + 3, based_on_version=graph.head())
    assert ok.kind == "accepted"
    assert _runs(graph, "dev", T0 + 4, based_on_version=10**6).reason == "future_version"


def test_stale_claim_quarantined(graph: Graph) -> None:
    """on_stale: quarantine — the stale claim is held against the current one."""
    seen = graph.head()
    graph.assert_("owns", "service:a", "database:d", agent="inventory")
    r = graph.assert_(
        "owns", "service:a", "database:d", agent="dba", task="audit-1", based_on_version=seen
    )
    assert (r.kind, r.reason) == ("quarantined", "stale_claim")
    assert graph.edge("owns", "service:a", "database:d").state == "unknown"


def test_stale_claim_accepted_and_flagged(graph: Graph) -> None:
    """on_stale: accept — the claim goes through with stale=true."""
    seen = graph.head()
    graph.assert_("lead_of", "team:web", "service:a", agent="hr", task="org")
    r = graph.assert_(
        "lead_of", "team:web", "service:a", agent="cto", task="org", based_on_version=seen
    )
    assert r.kind == "accepted" and r.decision["stale"] is True


# -- input hygiene ----------------------------------------------------------------------------


def test_duplicate_command_id_is_rejected_once_more(graph: Graph) -> None:
    """Reusing a command id gets its own rejection; the original decision stands."""
    a = graph.assert_("depends_on", "service:a", "service:b", agent="inventory", command_id="c-1")
    again = graph.assert_(
        "depends_on", "service:a", "service:c", agent="inventory", command_id="c-1"
    )
    assert again.reason == "duplicate_command"
    assert graph.edge("depends_on", "service:a", "service:c").state == "absent"
    assert graph.claim_info("c-1") is not None and a.kind == "accepted"


def _raw_claim(cid: str, **fields: object) -> dict[str, object]:
    """A claim command as a raw record carries it (the keyword API refuses bad values first)."""
    return {
        "type": "claim", "command_id": cid, "graph": "test", "agent": "inventory",
        "task": "", "run_id": None, "edge_type": "depends_on", "subject_type": "service",
        "subject_id": "a", "object_type": "service", "object_id": "b", "polarity": "assert",
        "confidence": 1.0, "evidence": [], "reasoning": "", "asserted_at": 1,
        "based_on_version": None, "properties": {}, **fields,
    }  # fmt: skip


def test_invalid_fields_are_rejected_with_codes(graph: Graph) -> None:
    """Out-of-range confidence, control characters and oversized fields in records are
    rejected, recorded, naming the field."""
    cases = [
        ({"confidence": 1.5}, "invalid_field", "confidence"),
        ({"subject_id": "a\x1fx"}, "invalid_id", "subject_id"),
        ({"subject_id": "x" * 300}, "field_too_large", "subject_id"),
        ({"reasoning": "x" * 20000}, "field_too_large", "reasoning"),
        ({"evidence": ["e"] * 65}, "field_too_large", "evidence"),
        ({"asserted_at": 253_402_300_800_000}, "invalid_field", "asserted_at"),
    ]
    receipts = graph.submit([_raw_claim(f"bad{i}", **f) for i, (f, _, _) in enumerate(cases)])  # type: ignore[misc]
    for r, (_, reason, field) in zip(receipts, cases, strict=True):
        assert (r.reason, r.decision["detail"].split()[0]) == (reason, field)
    assert graph.head() == len(cases)  # one rejection recorded per command, one version each
    assert graph.neighbors("service:a") == []


def test_the_keyword_api_refuses_a_field_outside_its_domain(graph: Graph) -> None:
    """The builders every surface calls check the declared domain before anything is sent:
    InputError naming the field and the bound, nothing recorded."""
    head = graph.head()
    for kwargs, field in (
        ({"confidence": 1.5}, "confidence"),
        ({"reasoning": "x" * 20000}, "reasoning"),
        ({"asserted_at": 253_402_300_800_000}, "asserted_at"),
    ):
        with pytest.raises(InputError, match=field):
            graph.assert_("depends_on", "service:a", "service:b", agent="inventory", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="subject_id has 300 characters; at most 256"):
        graph.assert_("depends_on", "service:" + "x" * 300, "service:b", agent="inventory")
    assert graph.head() == head


def test_wrong_graph_is_rejected(graph: Graph) -> None:
    """A command addressed to another graph is rejected, not applied."""
    from claimgraph.core.wire import encode_command

    cmd = {"type": "tick", "command_id": "t1", "graph": "other", "agent": "x", "task": ""}
    (r,) = graph.submit([encode_command(cmd)])  # type: ignore[list-item]
    assert r.reason == "wrong_graph"
