"""Placement and topics on a real broker (issue 11, points 14-16).

Graphs live where ``kafka place`` put them, whatever a producer's partitioner says, and growing
the partitions moves none; writers refuse unplaced graphs and topics ``kafka init`` did not
create; ``init`` fails loudly on an existing topic with the wrong settings; a graph written
before placement (rules revision 1) keeps working, is adopted where it is, and a decision of
it that the decisions topic cannot take stops the governor with what to do — never a silent
retry loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from claimgraph.core.governor import decide
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.state import GraphState
from claimgraph.core.wire import decode_decision, encode_command, encode_decision
from claimgraph.errors import ConfigError
from claimgraph.logs.kafka import KafkaConfig, KafkaLog, read_partition
from claimgraph.logs.kafka_layout import (
    init_topics,
    legacy_partition,
    place_graph,
    read_registry,
    wait_for_leaders,
)
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.streams.kafka import KafkaGovernor, verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import ROOT, SCHEMA
from tests.kafka_helpers import Decisions, decide_all, fresh_config, governor_thread

T0 = 1_800_000_000_000


def cli(cfg: KafkaConfig, graph: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``claimgraph --bootstrap B --prefix P --graph G ARGS`` in its own process."""
    base = ["--bootstrap", cfg.bootstrap, "--prefix", cfg.prefix, "--graph", graph]
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *base, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _decisions(cfg: KafkaConfig, partition: int) -> list[tuple[bytes | None, dict[str, Any]]]:
    return [
        (key, dict(decode_decision(rec.value)))
        for rec, key in read_partition(cfg, cfg.decisions_topic, partition)
    ]


def _tick(graph: str, cid: str) -> bytes:
    return encode_command(
        {"type": "tick", "command_id": cid, "graph": graph, "agent": "ticker", "task": ""}
    )


def test_writers_refuse_an_unplaced_graph_and_name_the_command(kafka_broker: Any) -> None:
    """KafkaGraph, the projector and a CLI write refuse a graph no admin placed (exit 2,
    naming ``kafka place``); after ``kafka place`` the same write lands; placing again is a
    no-op and moving a placement is refused."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=2, graphs=())
    with pytest.raises(ConfigError, match=r"is not placed.*kafka place"):
        KafkaGraph(cfg, "refunds")
    with pytest.raises(ConfigError, match="is not placed"):
        KafkaProjector(cfg, "refunds", ROOT / "never-created")
    refused = cli(cfg, "refunds", "schema", "apply", "schemas/graphs/refunds.yaml")
    assert refused.returncode == 2 and "kafka place" in refused.stderr, refused.stderr
    placed = cli(cfg, "refunds", "kafka", "place", "--partition", "1")
    assert placed.returncode == 0 and "on partition 1" in placed.stdout, placed.stderr
    again = cli(cfg, "refunds", "kafka", "place")
    assert again.returncode == 0 and "placed on partition 1 already" in again.stdout
    moved = cli(cfg, "refunds", "kafka", "place", "--partition", "0")
    assert moved.returncode == 2 and "never moves" in moved.stderr
    status = json.loads(cli(cfg, "refunds", "kafka", "status", "--json").stdout)
    assert (status["graph_partition"], status["placements"]) == (1, {"refunds": 1})
    with KafkaGraph(cfg, "refunds") as g, governor_thread(cfg, 1):
        assert g.partition == 1
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"


def test_writes_land_on_the_placed_partition_whatever_the_partitioner(kafka_broker: Any) -> None:
    """A Java-style producer (murmur2) puts refunds on another partition than the one it is
    placed on: that partition's governor records a rejection (misrouted) and accepts nothing;
    claimgraph's writers produce to the placed partition."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=4, graphs=())
    home = place_graph(cfg, "refunds").partition
    java = confluent_kafka.murmur2(b"refunds", 4)
    assert home == legacy_partition("refunds", 4) != java  # the case
    murmur = Producer(cfg.client(**{"partitioner": "murmur2_random"}))
    schema = {"type": "publish_schema", "command_id": "java-1", "graph": "refunds",
              "agent": "admin", "task": "", "document": SCHEMA, "source": "java"}  # fmt: skip
    landed: list[int] = []
    murmur.produce(
        cfg.commands_topic,
        key=b"refunds",
        value=encode_command(schema),  # type: ignore[arg-type]
        on_delivery=lambda err, msg: landed.append(msg.partition()),
    )
    assert murmur.flush(30) == 0 and landed == [java]
    on_java = Decisions(cfg, java)
    with governor_thread(cfg, java), governor_thread(cfg, home) as gov:
        with KafkaGraph(cfg, "refunds") as g:
            assert g.partition == home
            r = g.publish_schema(SCHEMA, agent="admin")
            assert (r.kind, r.decision["rules"]) == ("accepted", CURRENT)
        on_java.until({0})  # the Java record is decided on its partition
        assert gov.states["refunds"].placed == home
    on_java.close()
    [(_, d, _)] = on_java.by_input[0]
    assert (d["kind"], d["reason"]) == ("rejected", "misrouted")
    assert f"not placed on partition {java}" in d["detail"]
    assert verify_partition(cfg, java) == (1, 1) and verify_partition(cfg, home) == (2, 2)


def test_growing_the_partitions_moves_no_graph(kafka_broker: Any) -> None:
    """``kafka init --partitions`` more grows the topics; every placed graph stays on its
    partition with its history, and a restarted governor finds it there."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=2, graphs=("a", "b", "c"))
    homes = read_registry(cfg).placements
    with KafkaGraph(cfg, "b") as g, governor_thread(cfg, g.partition):
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
    grown = KafkaConfig(cfg.bootstrap, prefix=cfg.prefix, partitions=5)
    report = init_topics(grown)
    assert [line.split()[0] for line in report] == ["grown", "grown", "grown", "checked"]
    assert {g: legacy_partition(g, 5) for g in homes} != homes  # crc32 would have moved some
    assert read_registry(cfg).placements == homes
    with KafkaGraph(cfg, "b") as g, governor_thread(cfg, g.partition):
        assert g.partition == homes["b"]
        r = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        assert r.kind == "accepted"  # the schema published before growing is in force
    assert place_graph(cfg, "d").partition == legacy_partition("d", 2)  # as before growing
    assert verify_partition(cfg, homes["b"])[0] >= 3


def test_kafka_init_fails_loudly_on_an_auto_created_topic(kafka_broker: Any) -> None:
    """A client auto-creates the commands topic before ``kafka init`` (1 partition, 7 days,
    CreateTime): writers refuse it, and init exits non-zero naming every wrong setting
    without creating or changing anything."""
    cfg = KafkaConfig(kafka_broker.bootstrap, prefix=f"auto{uuid.uuid4().hex[:8]}")
    plain = Producer({"bootstrap.servers": cfg.bootstrap})  # not ours: it auto-creates
    plain.produce(cfg.commands_topic, key=b"g", value=b"early")
    assert plain.flush(30) == 0
    with pytest.raises(ConfigError, match="not created by claimgraph kafka init"):
        KafkaGraph(cfg, "g")
    r = cli(cfg, "g", "kafka", "init")
    assert r.returncode == 2, r.stdout + r.stderr
    for wrong in ("retention.ms", "message.timestamp.type", "max.message.bytes"):
        assert f"{cfg.commands_topic}: {wrong}" in r.stderr, r.stderr
    topics = AdminClient(cfg.client()).list_topics(timeout=10).topics
    assert not [t for t in topics if t.startswith(cfg.prefix) and t != cfg.commands_topic]


def test_writers_and_governors_refuse_a_topic_recreated_after_init(kafka_broker: Any) -> None:
    """A commands topic deleted and re-created (even with the right settings) is not the one
    ``kafka init`` checked: writers and the governor refuse it until init checks it again."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    admin = AdminClient(cfg.client())
    configs = {"retention.ms": "-1", "message.timestamp.type": "LogAppendTime",
               "max.message.bytes": "1048576"}  # fmt: skip
    admin.delete_topics([cfg.commands_topic])[cfg.commands_topic].result(30)
    while True:  # deletion is asynchronous: create again until the name is free
        try:
            fut = admin.create_topics([NewTopic(cfg.commands_topic, 1, 1, config=configs)])
            fut[cfg.commands_topic].result(30)
            break
        except confluent_kafka.KafkaException as exc:
            assert exc.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    wait_for_leaders(admin, [cfg.commands_topic], 30)
    with pytest.raises(ConfigError, match="is not the topic it created"):
        KafkaGraph(cfg, "test")
    with pytest.raises(ConfigError, match="is not the topic it created"):
        KafkaGovernor(cfg, 0).start()
    assert init_topics(cfg)  # checks the new topic and records it
    KafkaGraph(cfg, "test").close()


# -- graphs from before placement (rules revision 1) ----------------------------------------


def _old_governor(cfg: KafkaConfig, graph: str) -> int:
    """Decide the commands partition 0 as the governor before revisions did (rules 1, no
    placement): one transaction with the input position, as KafkaGovernor commits."""
    producer = Producer(cfg.client(**{"transactional.id": f"{cfg.prefix}-governor-p0"}))
    producer.init_transactions(30)
    group = Consumer(cfg.client(**{"group.id": f"{cfg.prefix}-governor-p0"}))
    state = GraphState(graph)
    state.offsets = []
    commands = read_partition(cfg, cfg.commands_topic, 0)
    producer.begin_transaction()
    for rec, _ in commands:
        d = decide(state, rec.value, rec.offset, rec.timestamp, rules=1)
        raw = encode_decision(d)
        state.evolve(d, state.decisions, raw)
        producer.produce(cfg.decisions_topic, key=graph.encode(), value=raw, partition=0)
    end = [TopicPartition(cfg.commands_topic, 0, commands[-1][0].offset + 1)]
    producer.send_offsets_to_transaction(end, group.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    group.close()
    return len(commands)


def _oversized_claim(graph: str) -> bytes:
    """A claim whose revision-1 rejection echoes ~1 MiB (its agent and task)."""
    half = 524_180  # the command fits the commands topic; its decisions are over 1 MiB
    return encode_command(
        {"type": "claim", "command_id": "big", "graph": graph, "agent": "a" * half,
         "task": "t" * half, "run_id": None, "edge_type": "depends_on",
         "subject_type": "service", "subject_id": "a", "object_type": "service",
         "object_id": "b", "polarity": "assert", "confidence": 0.5, "evidence": [],
         "reasoning": "", "asserted_at": T0, "based_on_version": None, "properties": {}}
    )  # fmt: skip


def test_a_revision_1_graph_is_adopted_and_an_undecidable_record_stops_loudly(
    kafka_broker: Any,
) -> None:
    """An old deployment's graph (decided under rules 1, never placed) keeps being decided;
    ``kafka place`` adopts it where it is; a revision-1 decision the decisions topic cannot
    take stops the governor naming the record and ``--upgrade-oversized``, after committing
    the decisions before it; with that option the record becomes a too_large rejection under
    revision 2, and the partition verifies."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1, graphs=())
    old = KafkaLog(cfg, cfg.commands_topic, 0, key="legacy")
    schema = {"type": "publish_schema", "command_id": "s", "graph": "legacy", "agent": "admin",
              "task": "", "document": SCHEMA, "source": "s.yaml"}  # fmt: skip
    old.append([encode_command(schema), _tick("legacy", "t1")])  # type: ignore[arg-type]
    assert _old_governor(cfg, "legacy") == 2
    [t2] = old.append([_tick("legacy", "t2")])  # unplaced: still decided, under revision 1
    decided = Decisions(cfg, 0)
    with governor_thread(cfg, 0):
        decided.until({t2})
    decided.close()
    assert [(d["rules"], d["kind"]) for _, d, _ in decided.by_input[t2]] == [(1, "accepted")]
    assert place_graph(cfg, "legacy").partition == 0  # adopted where crc32 put it
    with KafkaGraph(cfg, "legacy") as g, governor_thread(cfg, 0):
        r = g.tick()
        assert (r.kind, r.decision["rules"]) == ("accepted", 1)
    placed = [d for _, d in _decisions(cfg, 0) if d["command_type"] == "place"]
    assert [(d["reason"], d["rules"], d["count"]) for d in placed] == [("placed", 1, 0)]
    old.append([_tick("legacy", "t3"), _oversized_claim("legacy"), _tick("legacy", "t4")])
    before = len(_decisions(cfg, 0))
    gov = KafkaGovernor(cfg, 0)
    gov.start()
    gov.record_limit = 1_049_000  # as a decisions topic still at the broker's 1 MB default
    with pytest.raises(ConfigError, match="--upgrade-oversized legacy") as stopped:
        gov.run()
    gov.close()
    assert "rules revision 1" in str(stopped.value)
    assert len(_decisions(cfg, 0)) == before + 1  # t3 committed, nothing after it
    gov = KafkaGovernor(cfg, 0, upgrade_oversized=frozenset({"legacy"}))
    gov.start()
    gov.record_limit = 1_049_000
    assert decide_all(gov, cfg) == 2
    gov.close()
    big, t4 = [d for _, d in _decisions(cfg, 0)][-2:]
    assert (big["kind"], big["reason"], big["rules"]) == ("rejected", "too_large", CURRENT)
    assert big["prev_hash"] and big["command_sha256"]  # the chain starts here
    assert (t4["kind"], t4["rules"]) == ("accepted", CURRENT)  # placed: decided under CURRENT
    old.close()
    commands, decisions = verify_partition(cfg, 0)
    assert commands == decisions == before + 3
