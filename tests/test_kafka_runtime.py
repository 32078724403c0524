"""The Kafka runtime against a real broker: governor, projector, client, verify, audit, fencing."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from claimgraph.core.wire import decode_decision
from claimgraph.errors import GovernorFenced, VersionNotYetAvailable
from claimgraph.logs.kafka import KafkaConfig, read_partition
from claimgraph.logs.kafka_layout import init_topics
from claimgraph.service.audit import compare_with_reprojection
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.streams.kafka import KafkaGovernor, txn_producer_config, verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import SCHEMA
from tests.kafka_helpers import fresh_config, governor_thread, project_all, wait_all_decided

T0 = 1_800_000_000_000


def _project(cfg: KafkaConfig, graph: str, path: Path) -> KafkaProjector:
    proj = KafkaProjector(cfg, graph, path)
    project_all(proj, cfg)
    return proj


def test_end_to_end_on_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    """Writes return decisions and versions; versions have gaps; reads at them are exact."""
    cfg = fresh_config(kafka_broker.bootstrap)
    with KafkaGraph(cfg, "test") as g, governor_thread(cfg, g.partition):
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        a = g.assert_(
            "runs_in",
            "service:api",
            "environment:staging",
            agent="release",
            task="promote",
            asserted_at=T0,
        )
        b = g.assert_(
            "runs_in",
            "service:api",
            "environment:prod",
            agent="release-eu",
            task="promote",
            asserted_at=T0 + 10,
        )
        late = g.assert_(
            "runs_in",
            "service:api",
            "environment:dev",
            agent="release",
            task="promote",
            asserted_at=T0 + 5,
        )
        o1 = g.assert_("owns", "service:a", "database:d", agent="inventory")
        o2 = g.assert_("owns", "service:b", "database:d", agent="dba", task="audit-1")
        rej = g.assert_("owns", "service:c", "database:e", agent="mallory")
        stale = g.assert_(
            "runs_in",
            "service:api",
            "environment:qa",
            agent="release",
            task="promote",
            asserted_at=T0 + 20,
            based_on_version=a.version,
        )
    assert (b.reason, late.kind, o2.kind, rej.reason, stale.reason) == (
        "supersedes",
        "conflicted",
        "quarantined",
        "unauthorized",
        "stale_claim",
    )
    versions = [a.version, b.version, late.version, o1.version, o2.version]
    assert versions == sorted(versions)
    assert any(y - x > 1 for x, y in itertools.pairwise(versions)), (
        "transaction markers leave gaps between versions"
    )
    proj = _project(cfg, "test", tmp_path / "p")
    proj.close()
    with KafkaGraph(cfg, "test", tmp_path / "p") as r:
        assert r.head() == stale.version
        assert (
            r.edge("runs_in", "service:api", "environment:staging", at=a.version).state == "present"
        )
        assert (
            r.edge("runs_in", "service:api", "environment:staging", at=b.version).state == "absent"
        )
        # a version that is a gap (a commit marker) reads as the newest decision below it
        assert (
            r.edge("runs_in", "service:api", "environment:staging", at=a.version + 1).state
            == "present"
        )
        e = r.edge("owns", "service:a", "database:d")
        assert (e.state, e.conflict_id) == ("unknown", o2.decision["conflict_id"])
        with pytest.raises(VersionNotYetAvailable):
            r.edge("owns", "service:a", "database:d", at=r.head() + 100, timeout=0.3)
    assert verify_partition(cfg, g.partition) == (9, 9)  # the place record, then 8 commands
    rows, head = compare_with_reprojection(cfg, "test", tmp_path / "p")
    assert rows > 0 and head == stale.version


def test_transactional_producer_tuning_yields_to_deployment_properties() -> None:
    """The governor's producer backs off 10 ms on a busy transaction (librdkafka accepts the
    settings); a client property the deployment sets wins over the tuning."""
    plain = txn_producer_config(KafkaConfig("127.0.0.1:1"), **{"transactional.id": "t"})
    assert (plain["retry.backoff.ms"], plain["transactional.id"]) == (10, "t")
    Producer(plain)  # librdkafka checks every property here
    theirs = txn_producer_config(
        KafkaConfig("127.0.0.1:1", extra={"retry.backoff.ms": "250", "linger.ms": "0"})
    )
    assert (theirs["retry.backoff.ms"], theirs["linger.ms"]) == ("250", "0")


def test_projector_projects_a_partial_batch_at_once(kafka_broker: Any, tmp_path: Path) -> None:
    """A step waits for the first decision only, never to fill its batch: three decisions with
    a batch of 10,000 and a 300 s timeout are projected by the first steps that see them."""
    cfg = fresh_config(kafka_broker.bootstrap)
    with KafkaGraph(cfg, "test") as g, governor_thread(cfg, g.partition):
        g.publish_schema(SCHEMA, agent="admin")
        last = g.assert_("owns", "service:a", "database:d", agent="inventory")
    wait_all_decided(cfg, g.partition)
    proj = KafkaProjector(cfg, "test", tmp_path / "p", batch_size=10_000)
    t0 = time.monotonic()
    steps = 0
    while proj.applied < last.version:
        proj.step(timeout=300)
        steps += 1
        assert steps < 50, f"projector stalled at {proj.applied} of {last.version}"
    took = time.monotonic() - t0
    proj.close()
    assert took < 150, f"a partial batch waited {took:.0f}s for a full one"


def test_graphs_sharing_a_partition_keep_separate_state(kafka_broker: Any) -> None:
    """Two graphs on one partition: each has its own schema and claims."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1, graphs=("g1", "g2"))
    with KafkaGraph(cfg, "g1") as g1, KafkaGraph(cfg, "g2") as g2, governor_thread(cfg, 0):
        assert g1.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        r = g2.assert_("depends_on", "service:a", "service:b", agent="inventory")
        assert r.reason == "no_schema"
        assert (
            g1.assert_("depends_on", "service:a", "service:b", agent="inventory").kind == "accepted"
        )


def test_second_governor_fences_the_first(kafka_broker: Any) -> None:
    """A second governor for the partition fences the first; one decision per command."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    first = KafkaGovernor(cfg, 0)
    first.start()
    g.commands.append([_tick(i) for i in range(50)])
    assert first.run(max_commands=51) == 51  # the graph's place record, then 50 ticks
    g.commands.append([_tick(i) for i in range(50, 100)])
    second = KafkaGovernor(cfg, 0)
    second.start()  # init_transactions with the same transactional.id: the first is a zombie
    with pytest.raises(GovernorFenced):
        for _ in range(50):
            first.step()
    first.close()
    assert second.run(max_commands=50) == 50
    second.close()
    decisions = read_partition(cfg, cfg.decisions_topic, 0)
    inputs = [decode_decision(rec.value)["input_offset"] for rec, _ in decisions]
    assert sorted(inputs) == list(range(101)) and len(inputs) == 101
    assert verify_partition(cfg, 0) == (101, 101)
    g.close()


def _tick(i: int) -> bytes:
    from claimgraph.core.wire import encode_command

    return encode_command(
        {"type": "tick", "command_id": f"tick-{i}", "graph": "test", "agent": "ticker", "task": ""}
    )


def test_governor_restart_resumes_exactly(kafka_broker: Any) -> None:
    """A governor that stops and restarts continues after the last committed transaction."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_tick(i) for i in range(30)])
    gov = KafkaGovernor(cfg, 0, batch_size=7)
    gov.start()
    assert gov.run(max_commands=31) == 31  # the graph's place record, then 30 ticks
    gov.close()
    g.commands.append([_tick(i) for i in range(30, 45)])
    gov = KafkaGovernor(cfg, 0)
    gov.start()
    assert gov.states["test"].decisions == 31  # rebuilt from the decisions log
    assert gov.run(max_commands=15) == 15
    gov.close()
    assert verify_partition(cfg, 0) == (46, 46)
    g.close()


def test_kafka_init_is_idempotent_and_explains(kafka_broker: Any) -> None:
    """kafka init creates the topics once and then reports that it checked them."""
    cfg = KafkaConfig(kafka_broker.bootstrap, prefix=f"init{int(time.time() * 1000)}", partitions=3)
    first = init_topics(cfg)
    assert [line.split()[0] for line in first] == ["created"] * 4
    assert any("LogAppendTime" in line for line in first)
    again = init_topics(cfg)
    assert [line.split()[0] for line in again] == ["checked"] * 4
    assert "3 partitions" in again[0] and "settings ok" in again[0]


def test_a_projection_of_layout_1_is_projected_again(kafka_broker: Any, tmp_path: Path) -> None:
    """The projector finds rows of an older layout in its directory: it removes them and
    projects its partition again from the start; every read is the same as before."""
    from claimgraph.projections.reader import ProjectionReader
    from claimgraph.projections.rows import LAYOUT
    from tests.test_compact_rows import reads, same, to_layout_1

    cfg = fresh_config(kafka_broker.bootstrap)
    with KafkaGraph(cfg, "test") as g, governor_thread(cfg, g.partition):
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        for i, env in enumerate(("staging", "prod", "dev")):  # each supersedes the last
            g.assert_("runs_in", "service:api", f"environment:{env}", agent="release",
                      task="promote", asserted_at=T0 + i)  # fmt: skip
        g.assert_("owns", "service:a", "database:d", agent="inventory")
        g.assert_("owns", "service:b", "database:d", agent="dba", task="audit-1")
    proj = _project(cfg, "test", tmp_path / "p")

    class View:  # what tests.test_compact_rows.reads reads
        def __init__(self, db: Any, head: int) -> None:
            self.reader, self._head = ProjectionReader(db), head

        def head(self) -> int:
            return self._head

    head = proj.applied
    before = reads(View(proj.store.db, head))
    assert to_layout_1(proj.store.db) > 0
    proj.close()
    again = _project(cfg, "test", tmp_path / "p")
    try:
        assert again.store.layout() == LAYOUT and again.applied == head
        assert again.applied_at_start == -1  # projected from the start, not resumed
        after = reads(View(again.store.db, head))
        assert after.keys() == before.keys()
        for key, value in before.items():
            assert same(after[key], value), key
    finally:
        again.close()


def test_a_fatal_producer_error_that_is_no_fence_costs_a_new_producer(kafka_broker: Any) -> None:
    """A fatal producer error other than a fence (librdkafka's INVALID_TXN_STATE after a broker
    restart) drops that producer and starts again: the open transaction is aborted, every
    command is decided once; a fence, or the same failure four times without a commit
    between, stops the governor."""
    from confluent_kafka import KafkaError, KafkaException

    from claimgraph.streams.kafka import FATAL_RESTARTS

    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_tick(i) for i in range(20)])
    gov = KafkaGovernor(cfg, 0)
    gov.start()
    assert gov.run(max_commands=21) == 21
    old = gov._producer
    assert old is not None
    old.begin_transaction()  # an open transaction with a decision in it, never committed
    old.produce(cfg.decisions_topic, value=b"x", key=b"test", partition=0)
    old.flush(10)
    fatal = KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "after a restart", fatal=True))
    gov._recover(fatal)
    assert gov._producer is not None and gov._producer is not old
    g.commands.append([_tick(i) for i in range(20, 30)])
    assert gov.run(max_commands=10) == 10
    inputs = [
        decode_decision(r.value)["input_offset"]
        for r, _ in read_partition(cfg, cfg.decisions_topic, 0)
    ]
    assert sorted(inputs) == list(range(31)) == inputs  # the open transaction's record: aborted
    assert verify_partition(cfg, 0) == (31, 31)

    for _ in range(FATAL_RESTARTS):  # no commit between them: the counter runs on
        gov._recover(fatal)
    with pytest.raises(GovernorFenced, match="failed fatally 4 times in a row"):
        gov._recover(fatal)
    gov.close()
    fenced = KafkaGovernor(cfg, 0)
    fenced.start()
    fence = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    with pytest.raises(GovernorFenced, match="was fenced"):
        fenced._recover(fence)
    fenced.close()
    g.close()
