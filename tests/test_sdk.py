"""The SDK contract, run against both transports: embedded (in process) and HTTP (the real app).

Each test gets ``(as_agent, graph)`` from the ``sdk`` fixture: ``as_agent(name)`` is the SDK
acting as that principal (over HTTP, with that principal's token); ``graph`` is the embedded
graph underneath, used as the reference for what the transport must return.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from claimgraph.errors import VersionNotYetAvailable
from claimgraph.service.graph import Graph
from claimgraph.service.traces import digest, live_pins
from tests.conftest import SCHEMA
from tests.http_fixtures import SdkFactory

Sdk = tuple[SdkFactory, Graph]


def test_write_returns_receipt_and_wait_gives_decision_and_version(sdk: Sdk) -> None:
    """A write's receipt names its decision and version; wait() makes reads see it."""
    as_agent, g = sdk
    inv = as_agent("inventory")
    before = inv.head()
    r = inv.assert_("owns", "service:checkout", "database:orders", agent="inventory", task="x")
    assert r.kind == "accepted" and r.reason == "new"
    assert r.version == before + 1 == g.head()
    done = inv.wait(r, timeout=5)
    assert done.decision == g.decisions(r.version, 1)[0][1]  # the recorded decision, exactly
    assert inv.edge("owns", "service:checkout", "database:orders", at=r.version).state == "present"
    assert inv.edge("owns", "service:checkout", "database:orders", at=before).state == "absent"


def test_reads_match_the_embedded_reader_at_every_version(sdk: Sdk) -> None:
    """Every read through the transport equals the embedded read, at each version."""
    as_agent, g = sdk
    inv, tracer, rev = as_agent("inventory"), as_agent("tracer"), as_agent("reviewer")
    inv.assert_("depends_on", "service:a", "service:b", agent="inventory")
    tracer.deny("depends_on", "service:a", "service:b", agent="tracer")  # a polarity conflict
    inv.assert_("owns", "service:a", "database:d1", agent="inventory")
    inv.assert_("owns", "service:b", "database:d1", agent="inventory")  # supersedes its own
    (conflict,) = g.quarantine()
    rev.resolve(conflict["conflict_id"], agent="reviewer", winner=conflict["claims"][0])
    for v in range(-1, g.head() + 1):
        for edge in (
            ("depends_on", "service:a", "service:b"),
            ("owns", "service:b", "database:d1"),
        ):
            assert inv.edge(*edge, at=v) == g.edge(*edge, at=v)
            assert inv.history(*edge, at=v) == g.history(*edge, at=v)
        assert inv.neighbors("service:a", at=v) == g.neighbors("service:a", at=v)
        assert inv.neighbors("database:d1", direction="in", at=v, include_absent=True) == (
            g.neighbors("database:d1", direction="in", at=v, include_absent=True)
        )
        assert inv.slot("owns", "database:d1", direction="in", at=v) == g.slot(
            "owns", "database:d1", direction="in", at=v
        )
        assert inv.quarantine(at=v, include_closed=True) == g.quarantine(at=v, include_closed=True)
        assert inv.conflict(conflict["conflict_id"], at=v) == g.conflict(
            conflict["conflict_id"], at=v
        )
        assert inv.schema_info(at=v) == g.schema_info(at=v)
    assert inv.claim_info(conflict["claims"][0]) == g.claim_info(conflict["claims"][0])
    assert inv.claim_info("no-such-claim") is None
    assert inv.decisions(0, 100) == g.decisions(0, 100)


def test_rejections_come_back_as_receipts(sdk: Sdk) -> None:
    """A command the governor rejects is a receipt with its reason, on both transports."""
    as_agent, g = sdk
    intern = as_agent("intern")
    r = intern.assert_("owns", "service:a", "database:d", agent="intern")
    assert (r.kind, r.reason) == ("rejected", "unauthorized")
    assert r.version == g.head()
    assert g.edge("owns", "service:a", "database:d").state == "absent"


def test_reads_above_head_wait_then_fail(sdk: Sdk) -> None:
    """A read at a version not yet applied waits up to its timeout, then raises."""
    as_agent, g = sdk
    inv = as_agent("inventory")
    with pytest.raises(VersionNotYetAvailable):
        inv.edge("owns", "service:a", "database:d", at=g.head() + 5, timeout=0.1)


def test_a_run_pins_its_version_and_traces_reads_and_writes(sdk: Sdk) -> None:
    """Reads in a run stay at the pinned version while the graph moves; claims carry it."""
    as_agent, g = sdk
    inv, tracer = as_agent("inventory"), as_agent("tracer")
    inv.assert_("calls", "service:a", "service:b", agent="inventory")
    with inv.run(agent="inventory", task="reconcile") as run:
        pinned = run.version
        assert pinned == g.head()
        assert live_pins(g.run_events())[run.run_id] == pinned  # retention must keep it
        held = [p for p in g.pins.live() if p.owner.endswith(run.run_id)]
        assert [p.version for p in held] == [pinned]  # GC stops at it (taken in either transport)
        tracer.assert_("calls", "service:a", "service:c", agent="tracer")  # after the pin
        seen = run.neighbors("service:a", edge_type="calls")
        assert [n.node for n in seen] == [("service", "b")]  # not c: the run reads at its pin
        edge = run.edge("calls", "service:a", "service:c")
        assert edge.state == "absent" and edge.version == pinned
        r = run.assert_("calls", "service:a", "service:d")
        run.tool("lookup", {"q": "service:a"}, {"hits": 2})
    info = g.claim_info(r.command_id)
    assert info is not None
    assert info["based_on_version"] == pinned and info["run_id"] == run.run_id
    assert info["agent"] == "inventory" and info["task"] == "reconcile"
    events = g.run_events(run.run_id)
    assert [e["kind"] for e in events] == ["start", "read", "read", "write", "tool", "end"]
    assert g.pins.live() == []  # released at the run's end
    assert {e["pinned_version"] for e in events} == {pinned}
    read = json.loads(events[1]["payload"])
    assert read["query"]["op"] == "neighbors"
    assert read["digest"] == digest(g.neighbors("service:a", edge_type="calls", at=pinned))
    write = json.loads(events[3]["payload"])
    assert (write["command_id"], write["version"]) == (r.command_id, r.version)
    (summary,) = [s for s in inv.runs() if s.run_id == run.run_id]
    assert (summary.reads, summary.writes, summary.tools, summary.status) == (2, 1, 1, "ok")
    assert not summary.live
    assert run.run_id not in live_pins(g.run_events())  # ended: the pin is released


def test_replay_proves_identical_inputs_or_names_the_first_difference(sdk: Sdk) -> None:
    """Replaying a run re-reads at its pinned version; a tampered trace is caught."""
    as_agent, g = sdk
    inv = as_agent("inventory")
    inv.assert_("owns", "service:a", "database:d", agent="inventory")
    with inv.run(agent="inventory") as run:
        run.edge("owns", "service:a", "database:d")
        run.slot("owns", "database:d", direction="in")
        run.history("owns", "service:a", "database:d")
        run.quarantine()
    for _ in range(3):  # the graph moves on: replay must not care
        inv.assert_("owns", "service:b", "database:d", agent="inventory")
    report = inv.replay_run(run.run_id)
    assert report.identical and report.reads == 4 and report.pinned_version == run.version
    # a trace whose second read claims another result
    events = [dict(e) for e in g.run_events(run.run_id)]
    forged_id = "run-forged"
    for e in events:
        e["run_id"] = forged_id
    payload = json.loads(events[2]["payload"])
    payload["digest"] = "0" * 64
    events[2]["payload"] = json.dumps(payload)
    g.append_run_events(events)
    bad = inv.replay_run(forged_id)
    assert not bad.identical
    assert bad.first_difference is not None
    assert bad.first_difference["seq"] == 2
    assert bad.first_difference["query"]["op"] == "slot"


def test_a_shared_snapshot_pins_several_agents_to_one_version(sdk: Sdk) -> None:
    """Two agents' runs on one snapshot read the same version; the audit trail says so."""
    as_agent, g = sdk
    inv, tracer = as_agent("inventory"), as_agent("tracer")
    inv.assert_("calls", "service:a", "service:b", agent="inventory")
    snap = inv.snapshot()
    inv.assert_("calls", "service:a", "service:z", agent="inventory")  # moves head
    runs: list[Any] = []
    for client, agent in ((inv, "inventory"), (tracer, "tracer")):
        with client.run(agent=agent, snapshot=snap) as run:
            assert run.version == snap.version < g.head()
            run.neighbors("service:a")
            assert run.assert_("calls", f"service:{agent}", "service:y").kind == "accepted"
        runs.append(run)
    summaries = {s.run_id: s for s in g.runs()}
    for run in runs:
        s = summaries[run.run_id]
        assert (s.pinned_version, s.snapshot_id) == (snap.version, snap.snapshot_id)
    agents = {
        d["claim"]["agent"]: d["claim"]["based_on_version"]
        for _, d in g.decisions(0, 100)
        if d["claim"] and d["claim"]["run_id"] in {r.run_id for r in runs}
    }
    assert agents == {"inventory": snap.version, "tracer": snap.version}
    assert digest(runs[0].events[1]["payload"]) == digest(runs[1].events[1]["payload"])


def test_a_claim_in_a_run_is_based_on_its_pinned_version(sdk: Sdk) -> None:
    """A run's claim carries the pin: if the slot moved since, the claim is stale."""
    as_agent, _ = sdk
    inv, tracer = as_agent("inventory"), as_agent("tracer")
    with inv.run(agent="inventory") as run:
        tracer.assert_("calls", "service:a", "service:b", agent="tracer")  # after the pin
        r = run.assert_("calls", "service:a", "service:b")
    assert (r.kind, r.reason) == ("rejected", "stale_claim")
    assert json.loads(run.events[-2]["payload"])["reason"] == "stale_claim"


def test_a_run_reports_its_blocked_reads_at_its_end(sdk: Sdk) -> None:
    """Reads in a run that hit quarantine are reported once, with the run's id and pinned
    version, at its end; the run counts once for the conflict however many reads hit it."""
    as_agent, g = sdk
    inv, tracer = as_agent("inventory"), as_agent("tracer")
    inv.assert_("depends_on", "service:a", "service:b", agent="inventory")
    q = tracer.deny("depends_on", "service:a", "service:b", agent="tracer")
    assert q.kind == "quarantined"
    with inv.run(agent="inventory") as run:
        assert run.edge("depends_on", "service:a", "service:b").state == "unknown"
        run.neighbors("service:a")  # a second distinct query hitting the same conflict
        head = g.head()
    assert json.loads(run.events[-1]["payload"])["blocked"] == 1
    ((_, d),) = g.decisions(head + 1, 10)
    assert (d["command_type"], d["run_id"], d["count"], d["target"]) == (
        "read_blocked",
        run.run_id,
        1,
        q.decision["conflict_id"],
    )
    (c,) = g.quarantine()
    assert c["blocked_reads"] == 1 and c["blocked_runs"] == [run.run_id]


def test_fail_closed_fallback_reaches_both_transports(sdk: Sdk) -> None:
    """A reader of an unknown payment slot is served the fallback value, over HTTP too."""
    as_agent, g = sdk
    payments = SCHEMA.replace("node_types: [", "node_types: [verdict, ") + (
        "  - name: pays\n    subject: service\n    object: verdict\n"
        "    writers: [{agent: inventory}, {agent: tracer}]\n    cardinality: many-to-one\n"
        "    conflict_policy: quarantine\n    domain: payment\n    fallback: {value: REJECT}\n"
    )
    assert g.publish_schema(payments, agent="admin").kind == "accepted"
    g.assert_("pays", "service:a", "verdict:APPROVE", agent="inventory")
    g.assert_("pays", "service:a", "verdict:REJECT", agent="tracer")
    reader = as_agent("inventory")
    slot = reader.slot("pays", "service:a")
    edge = reader.edge("pays", "service:a", "verdict:APPROVE")
    assert (slot.state, slot.fallback) == ("unknown", "REJECT")
    assert (edge.state, edge.fallback) == ("unknown", "REJECT")
