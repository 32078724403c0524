"""An MCP session's run and refusals, without a transport (claimgraph.mcp.session)."""

from __future__ import annotations

from typing import Any

import pytest

from claimgraph.errors import NotFoundError
from claimgraph.mcp.session import AgentSession, Identity
from claimgraph.service import access as access_mod
from claimgraph.service.access import Access
from claimgraph.service.graph import Graph


def test_calls_renew_the_pin_and_start_run_moves_it(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """start_run pins head; a call after a tenth of the lease renews; start_run moves."""
    access = Access(graph, lease=600.0)
    s = AgentSession(access.of(Identity("inventory")))
    clock = [1000.0]
    monkeypatch.setattr(access_mod.time, "monotonic", lambda: clock[0])
    s.start_run()
    s.read_edge("depends_on", "service:a", "service:b")
    run = s.run()
    assert run is not None
    (pin,) = [p for p in graph.pins.live() if p.owner == run.run_id]
    clock[0] += 61  # past a tenth of the lease
    s.read_edge("depends_on", "service:a", "service:b")
    (renewed,) = [p for p in graph.pins.live() if p.owner == run.run_id]
    assert renewed.expires_at > pin.expires_at
    w = s.write(
        "assert_",
        {"edge_type": "depends_on", "subject": "service:a", "obj": "service:b", "confidence": 0.9},
    )
    assert w["decision"] == "accepted"
    fresh = s.start_run()
    assert fresh["pinned_version"] == w["version"] and fresh["run_id"] != run.run_id
    assert not [p for p in graph.pins.live() if p.owner == run.run_id]  # released
    assert s.read_edge("depends_on", "service:a", "service:b")["state"] == "present"
    joined = AgentSession(access.of(Identity("tracer")), snapshot_id=run.snapshot_id, one_run=True)
    assert joined.run_info()["pinned_version"] == run.version  # a shared snapshot
    with pytest.raises(NotFoundError):
        AgentSession(access.of(Identity("tracer")), snapshot_id="snap-nope", one_run=True).run()
    ended = s.end_run()
    assert graph.replay_run(ended["ended"]).identical


def test_refusals_are_recorded(graph: Graph) -> None:
    """A task or role the token lacks is refused and recorded as a refused command."""
    ident = Identity("dba", ("audit-*",), frozenset(), "token")
    s = AgentSession.over(graph, ident)
    r1 = s.start_run(task="deploy")
    assert (r1["decision"], r1["reason"]) == ("refused", "task_not_allowed")
    r2 = s.write("escalate", {"conflict_id": "cf:x", "reason": "please"})
    assert (r2["decision"], r2["reason"]) == ("refused", "not_resolver")
    got: list[Any] = [d for _, d in graph.decisions(0, 20) if d["command_type"] == "refused"]
    assert [(d["agent"], d["reason"], d["kind"]) for d in got] == [
        ("dba", "task_not_allowed", "rejected"),
        ("dba", "not_resolver", "rejected"),
    ]
    assert s.start_run(task="audit-1")["task"] == "audit-1"
    # the local owner's mode is not checked here: the governor judges the write
    owner = AgentSession.over(graph, Identity("intern", how="local-owner"))
    w = owner.write("assert_", {"edge_type": "owns", "subject": "service:a", "obj": "database:d"})
    assert (w["decision"], w["reason"]) == ("rejected", "unauthorized")


def test_runs_of_vanished_clients_end_with_their_lease(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session unused for a whole lease is dropped by the next request; a run unused for
    its whole lease is ended by the next start (its client went away)."""
    from types import SimpleNamespace

    from claimgraph.mcp import transports

    clock = [1000.0]
    monkeypatch.setattr(transports.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(access_mod.time, "monotonic", lambda: clock[0])
    access = Access(graph, lambda t: Identity("inventory") if t == "tok" else None, lease=120.0)
    sessions = transports.HttpSessions(access, lease=120.0)

    def ctx(sid: str) -> Any:
        headers = {"authorization": "Bearer tok", "mcp-session-id": sid}
        return SimpleNamespace(
            request_context=SimpleNamespace(request=SimpleNamespace(headers=headers))
        )

    first = sessions.of(ctx("s1"))
    run_id = first.start_run()["run_id"]
    assert sessions.of(ctx("s1")) is first
    clock[0] += 121.0
    second = sessions.of(ctx("s2"))
    assert sessions.live() == [second]
    assert second.run_info(run_id)["run_id"] == run_id  # a handle outlives its session
    clock[0] += 121.0
    second.start_run()  # the old run was unused for a whole lease: ended
    (summary,) = [s for s in graph.runs() if s.run_id == run_id]
    assert not summary.live and summary.status == "lease lapsed"
