"""One contract suite for the graph port, run against its implementations, sync and async.

``embedded`` is the graph in process, ``http`` the SDK over the real FastAPI app (through
httpx's ASGI transport, with a token per principal), ``kafka`` a KafkaGraph against a real
broker with a governor and a projector running; ``async-embedded`` and ``async-http`` are the
async SDK (``aopen``, ``aconnect``) over the first two, driven through a blocking adapter;
``attached`` is what the CLI uses beside a running writer (``service.attached``).
Each test gets ``as_agent(name)``: the port as that principal. Writes return receipts; reads
wait for the receipt's version (the Kafka projector applies decisions asynchronously), then
read at explicit versions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.commands import CLIENT_COMMANDS
from claimgraph.errors import VersionNotYetAvailable
from claimgraph.http.app import create_app
from claimgraph.service.api import Receipt
from claimgraph.service.port import GraphPort
from claimgraph.service.signers import Signer
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file

AsAgent = Callable[[str], GraphPort]


@pytest.fixture(params=["embedded", "http", "kafka", "async-embedded", "async-http", "attached"])
def port(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AsAgent]:
    """``as_agent(name)``: the graph port as that principal, over one implementation."""
    if request.param == "kafka":
        yield from _kafka(request, tmp_path)
        return
    if request.param.startswith("async-"):
        yield from _async(request.param, tmp_path)
        return
    if request.param == "attached":
        yield from _attached(tmp_path)
        return
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    clients: list[Any] = []
    if request.param == "embedded":

        def as_agent(agent: str) -> GraphPort:
            return g

    else:
        app = create_app(g, token_file())

        def as_agent(agent: str) -> GraphPort:
            c = claimgraph.connect("http://claimgraph.test", token=TOKENS[agent], app=app)
            clients.append(c)
            return c

    yield as_agent
    for c in clients:
        c.close()
    g.close()


def _attached(tmp_path: Path) -> Iterator[AsAgent]:
    """The CLI's view of a directory another writer holds: reads from RocksDB secondaries,
    writes over the writer's real unix socket (here the writer listens in this process)."""
    from claimgraph.service.attached import AttachedGraph
    from claimgraph.service.local_writer import WriterListener

    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    listener = WriterListener(g)
    attached = AttachedGraph(tmp_path / "g", "test")
    yield lambda agent: attached
    attached.close()
    listener.close()
    g.close()


def _async(kind: str, tmp_path: Path) -> Iterator[AsAgent]:
    from tests.async_adapter import Blocking, Loop

    loop = Loop()
    clients: list[Any] = []
    if kind == "async-embedded":
        g = loop.run(claimgraph.aopen(tmp_path / "g", create=True, graph="test"))
        clients.append(g)

        def as_agent(agent: str) -> GraphPort:
            return Blocking(g, loop)  # type: ignore[return-value]

    else:
        sync = claimgraph.open(tmp_path / "g", create=True, graph="test")
        app = create_app(sync, token_file())

        def as_agent(agent: str) -> GraphPort:
            c = loop.run(claimgraph.aconnect("http://claimgraph.test", TOKENS[agent], app=app))
            clients.append(c)
            return Blocking(c, loop)  # type: ignore[return-value]

    yield as_agent
    for c in clients:
        loop.run(c.aclose())
    if kind == "async-http":
        sync.close()
    loop.close()


def _kafka(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AsAgent]:
    from claimgraph.service.kafka_graph import KafkaGraph
    from claimgraph.streams.kafka_projector import KafkaProjector
    from tests.kafka_helpers import fresh_config, governor_thread

    broker = request.getfixturevalue("kafka_broker")
    cfg = fresh_config(broker.bootstrap)
    proj = KafkaProjector(cfg, "test", tmp_path / "p")
    proj.start()
    failed: list[BaseException] = []

    def project() -> None:
        try:
            proj.run()
        except BaseException as exc:  # surfaced after the test
            failed.append(exc)

    t = threading.Thread(target=project, daemon=True)
    with KafkaGraph(cfg, "test", tmp_path / "p") as g, governor_thread(cfg, g.partition):
        t.start()
        yield lambda agent: g
        proj.stop()
        t.join(30)
    proj.close()
    if failed:
        raise failed[0]


def _ok(r: Receipt, kind: str, reason: str | None = None) -> Receipt:
    assert r.kind == kind, (r.kind, r.reason, r.decision["detail"])
    if reason is not None:
        assert r.reason == reason, (r.reason, r.decision["detail"])
    return r


def test_every_client_command_round_trips(port: AsAgent) -> None:
    """Each client command of the catalogue reaches the governor and is decided as sent."""
    admin, inv, tracer, rev = port("admin"), port("inventory"), port("tracer"), port("reviewer")
    seen: dict[str, Receipt] = {}
    seen["publish_schema"] = _ok(admin.publish_schema(SCHEMA, agent="admin"), "accepted")
    a = seen["assert"] = _ok(
        inv.assert_("depends_on", "service:a", "service:b", agent="inventory"), "accepted"
    )
    d = seen["deny"] = _ok(
        tracer.deny("depends_on", "service:a", "service:b", agent="tracer"), "quarantined"
    )
    conflict = d.decision["conflict_id"] or ""
    seen["escalate"] = _ok(
        rev.escalate(conflict, agent="reviewer", reason="needs a person"), "accepted", "escalated"
    )
    seen["read_blocked"] = _ok(
        inv.read_blocked(conflict, 1, agent="inventory", run_id="run-1", pinned_version=d.version),
        "accepted",
    )
    seen["resolve"] = _ok(
        rev.resolve(conflict, agent="reviewer", winner=a.command_id, rationale="traced"),
        "resolved",
    )
    g = seen["grant"] = _ok(admin.grant("intern", "depends_on", agent="admin"), "accepted")
    seen["revoke"] = _ok(admin.revoke(g.decision["target"] or "", agent="admin"), "accepted")
    seen["retract"] = _ok(inv.retract(a.command_id, agent="inventory"), "retired")
    seen["erase"] = _ok(admin.erase(a.command_id, agent="admin", reason="privacy"), "accepted")
    seen["upgrade_rules"] = _ok(admin.upgrade_rules(2, agent="admin"), "rejected", "invalid_field")
    key = Signer.generate("k1")
    seen["register_key"] = _ok(
        admin.register_key("k1", "inventory", key.public_bytes, agent="admin"), "accepted"
    )
    seen["revoke_key"] = _ok(admin.revoke_key("k1", agent="admin"), "accepted", "key_revoked")
    names = {n for spec in CLIENT_COMMANDS for n in spec.client_names}
    assert set(seen) == names  # every client command of the catalogue was sent
    by_name = {n: spec.type for spec in CLIENT_COMMANDS for n in spec.client_names}
    versions = []
    for name, r in seen.items():
        assert r.decision["command_type"] == by_name[name]
        versions.append(r.version)
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    last = admin.wait(seen["revoke_key"], timeout=30)
    assert admin.decisions(last.version, 1)[0][1]["command_type"] == "revoke_key"


def test_reads_at_every_version(port: AsAgent) -> None:
    """Edge, slot, neighbors, history, quarantine, claims and edges read as of each version."""
    admin, inv, tracer = port("admin"), port("inventory"), port("tracer")
    admin.publish_schema(SCHEMA, agent="admin")
    a = _ok(inv.assert_("depends_on", "service:a", "service:b", agent="inventory"), "accepted")
    o = _ok(inv.assert_("owns", "service:a", "database:d", agent="inventory"), "accepted")
    d = _ok(tracer.deny("depends_on", "service:a", "service:b", agent="tracer"), "quarantined")
    inv.wait(d, timeout=30)
    conflict = d.decision["conflict_id"] or ""
    edge = ("depends_on", "service:a", "service:b")
    assert inv.edge(*edge, at=a.version - 1).state == "absent"
    assert inv.edge(*edge, at=a.version).state == "present"
    unknown = inv.edge(*edge, at=d.version)
    assert (unknown.state, unknown.conflict_id) == ("unknown", conflict)
    assert inv.slot("owns", "database:d", direction="in", at=o.version).nodes == (("service", "a"),)
    batch = [edge, ("owns", "service:a", "database:d"), ("owns", "service:zz", "database:d")]
    for v in (a.version - 1, a.version, o.version, d.version):  # one read, one version
        assert inv.read_edges(batch, at=v) == [inv.edge(*e, at=v) for e in batch]
    assert [e.state for e in inv.read_edges(batch, at=d.version)] == [
        "unknown", "present", "absent",
    ]  # fmt: skip
    ns = inv.neighbors("service:a", at=d.version)
    assert {(n.edge_type, n.node, n.state) for n in ns} == {
        ("depends_on", ("service", "b"), "unknown"),
        ("owns", ("database", "d"), "present"),
    }
    assert [h["version"] for h in inv.history(*edge, at=d.version)] == [a.version, d.version]
    (q,) = inv.quarantine(at=d.version)
    assert q["conflict_id"] == conflict and inv.quarantine(at=o.version) == []
    assert inv.conflict(conflict, at=d.version) == q
    assert inv.claim_info(a.command_id, at=a.version)["status"] == "visible"  # type: ignore[index]
    assert inv.claim_info("no-such-claim") is None
    assert inv.schema_info(at=a.version)["revision"] == 1  # type: ignore[index]
    payload = inv.escalation(conflict, at=d.version)
    assert payload is not None and {c["claim_id"] for c in payload["claims"]} == {
        a.command_id,
        d.command_id,
    }
    assert inv.escalation("cf:nope", at=d.version) is None
    assert {e.edge_type for e in inv.edges(at=d.version)} == {"depends_on", "owns"}
    assert inv.calibration("depends_on", at=d.version) == {}
    assert inv.head() >= d.version


def test_runs_pin_a_version_and_replay(port: AsAgent) -> None:
    """A run reads at its pinned version whatever lands later, and replays identically."""
    admin, inv = port("admin"), port("inventory")
    admin.publish_schema(SCHEMA, agent="admin")
    first = inv.wait(inv.assert_("owns", "service:a", "database:d", agent="inventory"), 30)
    snap = inv.snapshot()
    assert snap.version >= first.version
    later = inv.assert_("owns", "service:b", "database:e", agent="inventory")
    inv.wait(later, timeout=30)
    with inv.run(agent="inventory", task="audit", snapshot=snap) as run:
        assert run.version == snap.version
        assert run.edge("owns", "service:a", "database:d").state == "present"
        assert run.edge("owns", "service:b", "database:e").state == "absent"  # pinned before
        both = run.read_edges(
            [("owns", "service:a", "database:d"), ("owns", "service:b", "database:e")]
        )
        assert [e.state for e in both] == ["present", "absent"]  # one read, each traced
    report = inv.replay_run(run.run_id)
    assert report.identical
    (summary,) = [s for s in inv.runs() if s.run_id == run.run_id]
    assert summary.pinned_version == snap.version and not summary.live
    kinds = [e["kind"] for e in inv.run_events(run.run_id)]
    assert kinds == ["start", "read", "read", "read", "read", "end"]


def test_a_version_above_head_is_waited_for_then_refused(port: AsAgent) -> None:
    """A read above head waits up to its timeout, then raises VersionNotYetAvailable."""
    admin = port("admin")
    r = admin.wait(admin.publish_schema(SCHEMA, agent="admin"), timeout=30)
    with pytest.raises(VersionNotYetAvailable):
        admin.edge("owns", "service:a", "database:d", at=r.version + 1000, timeout=0.2)


def test_queries_beyond_one_hop(port: AsAgent) -> None:
    """paths, reach and filtered neighbors answer alike over every implementation."""
    admin, inv, tracer = port("admin"), port("inventory"), port("tracer")
    admin.publish_schema(SCHEMA, agent="admin")
    inv.assert_("depends_on", "service:a", "service:b", agent="inventory", confidence=0.5)
    inv.assert_("depends_on", "service:b", "service:c", agent="inventory")
    d = _ok(tracer.deny("depends_on", "service:b", "service:c", agent="tracer"), "quarantined")
    inv.wait(d, timeout=30)
    p = inv.paths("service:a", "service:c", at=d.version)
    assert [(len(x.hops), x.state, x.conflicts) for x in p.paths] == [
        (2, "unknown", (d.decision["conflict_id"],))
    ]
    r = inv.reach("service:a", max_hops=2, at=d.version)
    assert [(n.node, n.hops, n.certain) for n in r.nodes] == [
        (("service", "b"), 1, True),
        (("service", "c"), 2, False),
    ]
    assert inv.neighbors("service:a", min_confidence=0.6, at=d.version) == []
    assert [n.node for n in inv.neighbors("service:a", writer="inventory", at=d.version)] == [
        ("service", "b")
    ]
