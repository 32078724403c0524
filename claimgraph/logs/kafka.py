"""The Kafka logs: topic layout, administration and the log port over one topic partition.

Layout (``PREFIX`` defaults to ``claimgraph``):

* ``PREFIX.commands`` — what agents ask; a graph's commands live in the partition it is
  placed on (:mod:`claimgraph.logs.kafka_layout`), keyed by the graph name;
  ``message.timestamp.type=LogAppendTime`` so the governor's "now" comes from the log;
  kept forever, since ``verify`` replays it.
* ``PREFIX.decisions`` — the history: the same number of partitions, so each graph's decisions
  live in exactly one partition (one total order, one version line); kept forever.
* ``PREFIX.runs`` — run traces, in the graph's partition.
* ``PREFIX.placements`` — the registry (compacted): graph → partition, and what ``kafka init``
  created.

Only ``claimgraph kafka init`` creates these topics, and :mod:`claimgraph.logs.kafka_layout`
says what they must be; this module reads and writes partitions.

Offsets in a partition written by transactions have gaps (commit markers, aborted records):
nothing here assumes that the next offset is ``offset + 1``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from claimgraph.errors import ConfigError, StorageError
from claimgraph.logconf import kafka_client_log
from claimgraph.logs.base import LogRecord

__all__ = [
    "DEFAULT_OPERATOR",
    "KafkaConfig",
    "KafkaLog",
    "check_cluster",
    "consumer_lag",
    "read_partition",
    "topic_partitions",
    "watermark",
]


DEFAULT_OPERATOR = "claimgraph-kafka"  # who places graphs, unless --operator names another


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """Where the logs live. Read once at the edge; everything else takes it as is.

    ``operator`` is the agent whose ``place`` commands governors accept (rules revision 6) and
    whose placements writers and readers trust: configuration, never read from a topic.
    """

    bootstrap: str
    prefix: str = "claimgraph"
    partitions: int = 4
    replication: int = 1
    extra: dict[str, str] = field(default_factory=dict)
    operator: str = DEFAULT_OPERATOR

    @property
    def commands_topic(self) -> str:
        return f"{self.prefix}.commands"

    @property
    def decisions_topic(self) -> str:
        return f"{self.prefix}.decisions"

    @property
    def runs_topic(self) -> str:
        return f"{self.prefix}.runs"

    @property
    def placements_topic(self) -> str:
        return f"{self.prefix}.placements"

    def client(self, **conf: Any) -> dict[str, Any]:
        """A librdkafka configuration for this cluster.

        No client of ours ever creates a topic by using it (librdkafka's producers would,
        on a broker with ``auto.create.topics.enable``): only ``kafka init`` creates topics.
        librdkafka's own lines go to ``claimgraph.kafka`` (:class:`~claimgraph.logconf.
        KafkaClientLog`), served by the client's ``poll()``, not printed from its threads.
        """
        return {
            "bootstrap.servers": self.bootstrap,
            "logger": kafka_client_log(),
            **self.extra,
            **conf,
            "allow.auto.create.topics": False,
        }


_AUTH_CODES = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL}
)


def check_cluster(cfg: KafkaConfig, timeout: float = 20.0) -> None:
    """Fail fast on what no retry fixes, before a process starts its work.

    A client property librdkafka does not know or accept, credentials the broker refuses
    (SASL, TLS) → ConfigError naming it; no broker answering within ``timeout`` →
    StorageError naming the bootstrap and the last error. Without this, a wrong password
    shows up as a client that retries forever.
    """
    seen: list[KafkaError] = []
    try:
        admin = AdminClient(cfg.client(error_cb=seen.append, log_level=0))
    except (KafkaException, ValueError, TypeError) as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if isinstance(err, KafkaError) else str(err)
        raise ConfigError(f"Kafka client configuration: {text}") from None
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            admin.list_topics(timeout=0.5)
            return
        except KafkaException as exc:
            err = exc.args[0]
            last = err.str() if isinstance(err, KafkaError) else str(err)
        admin.poll(0)
        for e in seen:
            if e.code() in _AUTH_CODES:
                raise ConfigError(
                    f"Kafka at {cfg.bootstrap} refused this client's credentials or TLS "
                    f"settings: {e.str()} "
                    "(check security.protocol, sasl.mechanism, sasl.username, sasl.password "
                    "and the ssl.* properties: claimgraph config show)"
                )
        if seen:
            last = seen[-1].str()
        if time.monotonic() >= deadline:
            raise StorageError(
                f"no Kafka broker answered at {cfg.bootstrap} within {timeout:.0f}s ({last})"
            )
        time.sleep(0.1)  # a refused connection fails at once: do not spin


def topic_partitions(cfg: KafkaConfig, topic: str, timeout: float = 10.0) -> int:
    """How many partitions ``topic`` has (ConfigError if it does not exist)."""
    admin = AdminClient(cfg.client())
    md = admin.list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise ConfigError(
            f"topic {topic!r} does not exist on {cfg.bootstrap} "
            f"(run: claimgraph kafka init --bootstrap {cfg.bootstrap})"
        )
    return len(t.partitions)


class KafkaLog:
    """The log port over one partition of one topic (records keyed by ``key``)."""

    def __init__(self, cfg: KafkaConfig, topic: str, partition: int, key: str | bytes = "") -> None:
        self.cfg = cfg
        self.topic = topic
        self.partition = partition
        self.key = (key.encode("utf-8") if isinstance(key, str) else key) or None
        self._producer: Producer | None = None

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                self.cfg.client(
                    **{
                        "enable.idempotence": True,
                        "acks": "all",
                        "linger.ms": 5,
                        "batch.num.messages": 10000,
                        # the topic's max.message.bytes decides (kafka init sets it), and a
                        # record over it is refused by the broker with a clear error
                        "message.max.bytes": 16 * 1024 * 1024,
                    }
                )
            )
        return self._producer

    def append(self, values: Sequence[bytes]) -> list[int]:
        """Produce ``values`` (idempotent, acks=all) and return their offsets, in order."""
        producer = self._get_producer()
        offsets: list[int | None] = [None] * len(values)
        errors: list[str] = []

        def on_delivery(err: KafkaError | None, msg: Any, *, i: int) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                offsets[i] = msg.offset()

        for i, v in enumerate(values):
            while True:
                try:
                    producer.produce(
                        self.topic,
                        value=bytes(v),
                        key=self.key,
                        partition=self.partition,
                        on_delivery=functools.partial(on_delivery, i=i),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
                except KafkaException as exc:  # e.g. a record too large, an unknown partition
                    raise StorageError(
                        f"could not append to {self.topic}[{self.partition}]: {exc}"
                    ) from None
        remaining = producer.flush(60)
        if remaining or errors or any(o is None for o in offsets):
            raise StorageError(
                f"could not append to {self.topic}[{self.partition}]: "
                f"{errors[0] if errors else f'{remaining} not acknowledged'}"
            )
        return [o for o in offsets if o is not None]

    def read(self, start: int, limit: int, timeout: float = 10.0) -> list[LogRecord]:
        """Up to ``limit`` committed records from ``start`` (read_committed), in order."""
        out: list[LogRecord] = []
        for rec in read_partition(self.cfg, self.topic, self.partition, start, limit, timeout):
            out.append(rec[0])
        return out

    def end(self) -> int:
        return watermark(self.cfg, self.topic, self.partition)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)


def watermark(cfg: KafkaConfig, topic: str, partition: int, timeout: float = 15.0) -> int:
    """The high watermark of a partition, retrying while leadership settles."""
    consumer = Consumer(cfg.client(**{"group.id": "claimgraph-probe", "enable.auto.commit": False}))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=5, cached=False
                )
                return int(high)
            except KafkaException as exc:
                err = exc.args[0]
                if time.monotonic() >= deadline or (
                    not err.retriable()
                    and err.code()
                    not in (
                        KafkaError.NOT_LEADER_FOR_PARTITION,
                        KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                    )
                ):
                    raise StorageError(
                        f"cannot read the end of {topic}[{partition}]: {err.str()}"
                    ) from None
                time.sleep(0.2)
    finally:
        consumer.close()


def consumer_lag(consumer: Consumer, topic: str, partition: int) -> int:
    """Records of a partition a consumer has not read yet (from its cached watermark)."""
    tp = TopicPartition(topic, partition)
    _, high = consumer.get_watermark_offsets(tp, cached=True)
    pos = consumer.position([tp])[0].offset
    return max(0, int(high) - int(pos)) if high >= 0 and pos >= 0 else 0


def read_partition(
    cfg: KafkaConfig,
    topic: str,
    partition: int,
    start: int = 0,
    limit: int | None = None,
    timeout: float = 10.0,
) -> list[tuple[LogRecord, bytes | None]]:
    """Committed records (with keys) from ``start`` to the current end of a partition."""
    consumer = Consumer(
        cfg.client(
            **{
                "group.id": "claimgraph-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 52428800,
                # the end is known from a fetch that finds nothing: the broker holds that
                # one up to fetch.wait.max.ms (500 by default) — every read paid it once
                "fetch.wait.max.ms": 10,
            }
        )
    )
    out: list[tuple[LogRecord, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, max(start, 0))])
        idle = 0.0
        while limit is None or len(out) < limit:
            want = 10000 if limit is None else min(10000, limit - len(out))
            # wait for one record, then take what is fetched: consume(want, 0.5) would wait
            # the whole 0.5 s whenever fewer than ``want`` records remain (every read's end)
            first = consumer.poll(0.5)
            msgs = [] if first is None else [first]
            if first is not None and want > 1:
                msgs.extend(consumer.consume(num_messages=want - 1, timeout=0))
            if not msgs:
                idle += 0.5
                if idle >= timeout:
                    raise StorageError(
                        f"timed out reading {topic}[{partition}] "
                        f"at offset {out[-1][0].offset + 1 if out else start}"
                    )
                continue
            idle = 0.0
            eof = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof = True
                        continue
                    raise StorageError(f"reading {topic}[{partition}]: {err.str()}")
                out.append(
                    (LogRecord(int(m.offset() or 0), m.timestamp()[1], m.value() or b""), m.key())
                )
                if limit is not None and len(out) >= limit:
                    break
            if eof:
                break
    finally:
        consumer.close()
    return out
