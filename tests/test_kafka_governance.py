"""Governance on the Kafka runtime: a ticker process drives deadlines; escalations are read
from a projector's store; verify replays every exit and verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.service.resolvers import run_resolvers
from claimgraph.streams.kafka import verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.kafka_helpers import cli_process, fresh_config, governor_thread, project_all

SCHEMA = """
principals: {admins: [admin], resolvers: [resolver-bot], humans: ["human:*"]}
node_types: [refund, verdict]
edge_types:
  - name: refund_decision
    subject: refund
    object: verdict
    writers: [{agent: "*-agent"}]
    cardinality: many-to-one
    conflict_policy: quarantine
    domain: refund
    fallback: {value: REJECT}
    quarantine: {deadline: 1s, on_exit: escalate}
    resolvers:
      - rules:
          - name: block-wins
            when: 'claims.exists(c, c.object == "BLOCK")'
            adopt: 'c.object == "BLOCK"'
      - human
"""


def test_ticker_deadlines_and_resolvers_on_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    cfg = fresh_config(kafka_broker.bootstrap, graphs=("pay",))
    with KafkaGraph(cfg, "pay") as g, governor_thread(cfg, g.partition):
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        g.assert_("refund_decision", "refund:R1", "verdict:REJECT", agent="risk-agent")
        a = g.assert_("refund_decision", "refund:R1", "verdict:APPROVE", agent="exp-agent")
        g.assert_("refund_decision", "refund:R2", "verdict:BLOCK", agent="fraud-agent")
        b = g.assert_("refund_decision", "refund:R2", "verdict:APPROVE", agent="exp-agent")
        assert a.kind == b.kind == "quarantined"
        ticker = cli_process(cfg, "pay", "ticker", "--interval", "300ms", "--count", "6")
        assert ticker.wait(timeout=120) == 0, ticker.stderr.read() if ticker.stderr else ""
        proj = KafkaProjector(cfg, "pay", tmp_path / "p")
        project_all(proj, cfg)  # once the ticks are decided
        proj.close()
        with KafkaGraph(cfg, "pay", tmp_path / "p") as r:
            escalated = {p["conflict_id"]: p for p in r.escalations()}
            assert set(escalated) == {a.decision["conflict_id"], b.decision["conflict_id"]}
            assert all(p["escalation_reason"].startswith("deadline") for p in escalated.values())
            slot = r.slot("refund_decision", "refund:R1")
            assert (slot.state, slot.fallback) == ("unknown", "REJECT")
            # escalated conflicts are left to people; a person resolves R2 here
            assert run_resolvers(r, agent="resolver-bot") == []
            done = r.resolve(
                b.decision["conflict_id"] or "", agent="human:ann", winner=None, rationale="no"
            )
            assert done.kind == "resolved"
    decided, commands = verify_partition(cfg, g.partition)
    assert decided == commands >= 12
