"""The dev/CI Kafka broker (tools/kafka_broker.py): it starts, keeps data, survives faults."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

# In CI a missing client is a failure, as a broker that does not start is (tests.kafka_fixtures
# is not imported here: pytest_plugins below loads it, with assertion rewriting).
if os.environ.get("CI", "").strip().lower() in ("", "0", "false", "no"):
    pytest.importorskip("confluent_kafka")
import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker, KafkaCluster

pytest_plugins = ["tests.kafka_fixtures"]  # idempotent once tests/conftest.py registers it too
pytestmark = pytest.mark.kafka

T = TypeVar("T")
QUIET = {"log_level": 0}  # no librdkafka chatter about nodes we stopped on purpose


def _retry(what: str, fn: Callable[[], T], timeout: float = 60) -> T:
    """``fn()``, retried on KafkaException (a busy machine, a leader moving) until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except KafkaException as exc:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what} still failing after {timeout}s: {exc}") from exc
            time.sleep(0.5)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = -1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=rf)]
    )
    futures[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while True:  # until every partition has a leader
        md = _retry("metadata", lambda: admin.list_topics(topic=name, timeout=10)).topics[name]
        parts = md.partitions.values()
        if md.error is None and len(parts) == partitions and all(p.leader >= 0 for p in parts):
            return
        assert time.monotonic() < deadline, f"{name} has no leaders: {md.partitions}"
        time.sleep(0.2)


def _produce(bootstrap: str, topic: str, values: list[str], **conf: Any) -> list[str]:
    """Produce ``values`` with acks=all and idempotence; return those acknowledged, in order."""
    acked: list[str] = []
    errors: list[str] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked.append(msg.value().decode())
        else:
            errors.append(f"{msg.value().decode()}: {err}")

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **QUIET,
            **conf,
        }
    )
    for v in values:
        producer.produce(topic, v.encode(), on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0, "messages still in flight after 60 s"
    assert not errors, errors[:5]
    return acked


def _consumer(bootstrap: str, isolation: str = "read_committed") -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            **QUIET,
        }
    )


def _read_all(bootstrap: str, topic: str, timeout: float = 60) -> list[str]:
    """Every value in ``topic`` up to its current end (non-transactional topics)."""
    consumer = _consumer(bootstrap)
    try:
        md = _retry("metadata", lambda: consumer.list_topics(topic, timeout=10))
        parts = md.topics[topic].partitions

        def end(p: int) -> int:
            tp = TopicPartition(topic, p)
            return int(_retry("end offset", lambda: consumer.get_watermark_offsets(tp, 10))[1])

        ends = {p: end(p) for p in parts}
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
        values: list[str] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"read {len(values)} values, stuck before the end"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value().decode())
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return values
    finally:
        consumer.close()


def _read_until(bootstrap: str, topic: str, last: str, timeout: float = 60) -> list[str]:
    """Values of a one-partition topic, read_committed, up to and including ``last``."""
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        values: list[str] = []
        deadline = time.monotonic() + timeout
        while not values or values[-1] != last:
            assert time.monotonic() < deadline, f"no {last!r} after {timeout}s; read {values}"
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value().decode())
        return values
    finally:
        consumer.close()


def _transactions(bootstrap: str, topic: str, committed: list[str], aborted: list[str]) -> None:
    """Commit ``committed`` (minus its last value), abort ``aborted``, then commit the last."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _topic("tx"), **QUIET})
    producer.init_transactions(60)
    for batch, commit in ((committed[:-1], True), (aborted, False), (committed[-1:], True)):
        producer.begin_transaction()
        for v in batch:
            producer.produce(topic, v.encode())
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(30)
            producer.abort_transaction(60)


def test_broker_starts_and_creates_topics(kafka_broker: KafkaBroker) -> None:
    """The broker answers metadata on 127.0.0.1 and creates a three-partition topic."""
    assert kafka_broker.running and kafka_broker.bootstrap.startswith("127.0.0.1:")
    topic = _topic("created")
    _create_topic(kafka_broker.bootstrap, topic, partitions=3)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, **QUIET})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [kafka_broker.node_id]
    assert len(md.topics[topic].partitions) == 3
    assert kafka_broker.log_path.stat().st_size > 0  # log4j2 writes where we said


def test_transactional_commit_seen_by_read_committed(kafka_broker: KafkaBroker) -> None:
    """A transactional producer commits; read_committed sees exactly the committed records."""
    topic = _topic("tx")
    _create_topic(kafka_broker.bootstrap, topic)
    committed = [f"c{i}" for i in range(10)]
    aborted = [f"a{i}" for i in range(5)]
    _transactions(kafka_broker.bootstrap, topic, committed, aborted)
    assert _read_until(kafka_broker.bootstrap, topic, committed[-1]) == committed


def test_restart_keeps_data_and_address(kafka_broker: KafkaBroker) -> None:
    """Records acknowledged before a clean restart, and before a SIGKILL, are still there."""
    topic = _topic("restart")
    _create_topic(kafka_broker.bootstrap, topic, partitions=2)
    bootstrap = kafka_broker.bootstrap
    first = _produce(bootstrap, topic, [f"v{i}" for i in range(50)])
    kafka_broker.restart()
    assert kafka_broker.bootstrap == bootstrap
    assert sorted(_read_all(bootstrap, topic)) == sorted(first)
    second = _produce(bootstrap, topic, [f"w{i}" for i in range(50)])
    kafka_broker.kill()
    assert not kafka_broker.running
    kafka_broker.restart()
    assert sorted(_read_all(bootstrap, topic)) == sorted(first + second)


def test_cluster_one_node_down_acks_all_and_transactions(kafka_cluster: KafkaCluster) -> None:
    """With the partition leader of three nodes stopped, acks=all and transactions succeed."""
    topic = _topic("degraded")
    _create_topic(kafka_cluster.bootstrap, topic, partitions=3)
    before = _produce(kafka_cluster.bootstrap, topic, [f"b{i}" for i in range(100)])
    down = kafka_cluster.partition_leader(topic, 0)
    kafka_cluster.stop_node(down)
    assert kafka_cluster.running_nodes() == [n for n in (1, 2, 3) if n != down]
    during = _produce(kafka_cluster.bootstrap, topic, [f"d{i}" for i in range(300)])
    assert len(during) == 300
    tx_topic = _topic("degraded-tx")
    _create_topic(kafka_cluster.bootstrap, tx_topic)
    committed = [f"t{i}" for i in range(5)]
    _transactions(kafka_cluster.bootstrap, tx_topic, committed, ["aborted"])
    assert _read_until(kafka_cluster.bootstrap, tx_topic, committed[-1]) == committed
    assert sorted(_read_all(kafka_cluster.bootstrap, topic)) == sorted(before + during)
    kafka_cluster.restart_node(down)
    kafka_cluster.wait_fully_replicated()
    assert sorted(_read_all(kafka_cluster.bootstrap, topic)) == sorted(before + during)


def test_cluster_leader_killed_mid_stream_loses_nothing_acked(kafka_cluster: KafkaCluster) -> None:
    """SIGKILL the leader while producing with acks=all: every acknowledged record survives."""
    topic = _topic("crash")
    _create_topic(kafka_cluster.bootstrap, topic)
    victim = kafka_cluster.partition_leader(topic, 0)
    acked: list[str] = []
    failed: list[str] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        (acked if err is None else failed).append(msg.value().decode())

    producer = Producer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 60000,
            **QUIET,
        }
    )
    for i in range(2000):
        producer.produce(topic, f"m{i}".encode(), on_delivery=report)
        producer.poll(0)
        if i == 600:
            producer.flush(30)
            kafka_cluster.kill_node(victim)
        elif i % 100 == 0:
            time.sleep(0.02)  # keep records flowing across the fail-over
    assert producer.flush(90) == 0
    assert len(acked) + len(failed) == 2000
    assert len(acked) >= 601, "records acknowledged before the kill went missing"
    assert kafka_cluster.partition_leader(topic, 0) != victim
    read = _read_all(kafka_cluster.bootstrap, topic)
    assert len(read) == len(set(read)), "duplicates despite idempotence"
    assert set(acked) <= set(read), sorted(set(acked) - set(read))[:10]
    kafka_cluster.restart_node(victim)
    kafka_cluster.wait_fully_replicated()
    assert set(acked) <= set(_read_all(kafka_cluster.bootstrap, topic))
