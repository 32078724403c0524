"""Runs and signed commands on the Kafka runtime, against a real broker.

A direct Kafka producer signs its commands; the transactional governor admits the signed ones
and rejects unsigned and replayed ones, and verify re-decides the partition identically. Run
traces go to the PREFIX.runs topic and replay from the projection at the pinned version.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from claimgraph.errors import ConfigError
from claimgraph.logs.kafka import KafkaConfig, topic_partitions
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.service.signers import Signer
from claimgraph.streams.kafka import verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import SCHEMA
from tests.kafka_helpers import fresh_config, governor_thread


def _wait_for_topics(cfg: KafkaConfig, timeout: float = 20.0) -> None:
    """Topic metadata can lag creation (seen right after a broker restart in the fault tests)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            topic_partitions(cfg, cfg.commands_topic)
            topic_partitions(cfg, cfg.runs_topic)
            return
        except ConfigError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_signed_producer_and_runs_on_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    """With a schema that requires signatures: signed commands admitted, unsigned and
    replayed refused; a run's trace replays."""
    cfg = fresh_config(kafka_broker.bootstrap)
    _wait_for_topics(cfg)
    admin, inv = Signer.generate("admin-1"), Signer.generate("inv-1")
    with KafkaGraph(cfg, "test") as g, governor_thread(cfg, g.partition):
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        assert g.register_key("admin-1", "admin", admin.public_bytes, agent="admin").kind == (
            "accepted"
        )
        g.signer = admin
        assert g.register_key("inv-1", "inventory", inv.public_bytes, agent="admin").decision[
            "signed_by"
        ] == ("admin-1")
        signed = SCHEMA.replace(
            "  admins: [admin]\n", "  admins: [admin]\n  signatures: required\n"
        )
        assert g.publish_schema(signed, agent="admin").kind == "accepted"  # signed by admin-1
        g.signer = inv
        ok = g.assert_("owns", "service:a", "database:d", agent="inventory", command_id="c1")
        assert (ok.kind, ok.decision["signed_by"]) == ("accepted", "inv-1")
        g.signer = None
        unsigned = g.assert_("owns", "service:b", "database:e", agent="inventory")
        assert unsigned.reason == "unsigned"
        g.signer = inv
        replay = g.assert_("owns", "service:a", "database:d", agent="inventory", command_id="c1")
        assert replay.reason == "duplicate_command"
        proj = KafkaProjector(cfg, "test", tmp_path / "p")
        proj.run(until=replay.version)  # caught up: the last decision is applied
        proj.close()
    assert verify_partition(cfg, g.partition) == (8, 8)  # place + 7, re-decided identically
    with KafkaGraph(cfg, "test", tmp_path / "p") as r:
        with r.run(agent="inventory", task="audit") as run:
            assert run.version == r.head() == replay.version
            assert run.edge("owns", "service:a", "database:d").state == "present"
            assert run.edge("owns", "service:b", "database:e").state == "absent"
        events = r.run_events(run.run_id)
        assert [e["kind"] for e in events] == ["start", "read", "read", "end"]
        (summary,) = [s for s in r.runs() if s.run_id == run.run_id]
        assert summary.pinned_version == run.version and not summary.live
        assert r.replay_run(run.run_id).identical


def test_http_api_over_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    """What serve --bootstrap runs: the app over a Kafka graph; writes wait for decisions."""
    import claimgraph
    from claimgraph.http.app import create_app
    from tests.http_fixtures import TOKENS, token_file

    cfg = fresh_config(kafka_broker.bootstrap)
    _wait_for_topics(cfg)
    with KafkaGraph(cfg, "test") as g, governor_thread(cfg, g.partition):
        schema = g.publish_schema(SCHEMA, agent="admin")
        assert schema.kind == "accepted"
        proj = KafkaProjector(cfg, "test", tmp_path / "p")
        proj.run(until=schema.version)
        proj.close()
        with KafkaGraph(cfg, "test", tmp_path / "p") as served:
            app = create_app(served, token_file())
            with claimgraph.connect("http://kafka", token=TOKENS["inventory"], app=app) as c:
                r = c.assert_("owns", "service:a", "database:d", agent="inventory")
                assert r.kind == "accepted" and r.version > 0
                spoof = c._request(
                    "POST", "/v1/commands/claim", json={"edge_type": "owns",
                    "subject": "service:b", "object": "database:e", "agent": "admin"},
                )  # fmt: skip
                assert spoof.status_code == 403 and spoof.json()["reason"] == "agent_mismatch"
                proj = KafkaProjector(cfg, "test", tmp_path / "p")
                proj.run(until=spoof.json()["version"])
                proj.close()
                c.wait(r, timeout=10)
                assert c.edge("owns", "service:a", "database:d", at=r.version).state == "present"
                last = c.decisions(spoof.json()["version"], 1)[0][1]
                assert (last["command_type"], last["reason"]) == ("refused", "agent_mismatch")
