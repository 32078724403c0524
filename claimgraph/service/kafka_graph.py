"""A Kafka-backed graph for clients: writes go to the commands topic, reads to a projection.

Writes produce the command (keyed by graph) to the partition the graph is placed on (the
registry, :mod:`claimgraph.logs.kafka_layout`; an unplaced graph is refused, and before the
first write the placement is verified against the log: a registry record that is not the
operator's stops the writer, :func:`~claimgraph.logs.kafka_layout.verified_placement`) and
wait for its decision on the decisions partition, so each write returns the decision and the
version it landed at, as the embedded graph does. Reads open a projector's directory as a RocksDB
*secondary* instance and catch up with the primary (the projector process) before each read.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from rocksdict import AccessType, Options, Rdict

from claimgraph.core.model import Command, Decision
from claimgraph.core.wire import decode_decision, encode_command
from claimgraph.errors import ConfigError, StorageError, VersionNotYetAvailable
from claimgraph.logs.kafka import KafkaConfig, KafkaLog, topic_partitions, watermark
from claimgraph.logs.kafka_layout import check_layout, verified_placement
from claimgraph.logs.rocks import rocksdb_errors
from claimgraph.projections.projector import ProjectionStore
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.retention import PinRegistry, catch_up
from claimgraph.service.api import Receipt, TickerWrites
from claimgraph.service.lag import ProjectionLag
from claimgraph.service.port import GraphAPI
from claimgraph.service.reads import GraphReads
from claimgraph.service.traces import decode_events, encode_events

if TYPE_CHECKING:
    from claimgraph.service.port import GraphPort

__all__ = ["KafkaGraph"]


class KafkaGraph(TickerWrites, GraphReads, GraphAPI):
    """One graph on a Kafka cluster, read through a local projection."""

    def __init__(
        self,
        cfg: KafkaConfig,
        graph: str,
        projection: Path | None = None,
        *,
        write_timeout: float = 30.0,
    ) -> None:
        self.cfg = cfg
        self.name = graph
        self.write_timeout = write_timeout
        # only on topics kafka init created, only for a graph an admin placed, and to the
        # partition it is placed on, whatever a client's partitioner would pick
        self._registry = check_layout(cfg)
        self.partition = self._registry.partition_of(graph)
        self._verified = False  # the placement checked against the log (before a write)
        parts = topic_partitions(cfg, cfg.commands_topic)
        if self.partition >= parts:
            raise ConfigError(
                f"graph {graph!r} is placed on partition {self.partition}, but "
                f"{cfg.commands_topic} has {parts} partitions"
            )
        self.commands = KafkaLog(cfg, cfg.commands_topic, self.partition, key=graph)
        self._secondary: Path | None = None
        self._runs: KafkaLog | None = None
        self._projection_dir = projection
        self._db: Rdict | None = None
        self._reader: ProjectionReader | None = None
        self._lag_consumer: Consumer | None = None
        self._lag_lock = threading.Lock()
        if projection is not None:
            primary = projection / "projection"
            if not primary.exists():
                raise ConfigError(
                    f"{projection} holds no projection yet (start: claimgraph "
                    f"projector --graph {graph} --data {projection})"
                )
            self._secondary = Path(tempfile.mkdtemp(prefix="claimgraph-secondary-"))
            with rocksdb_errors(f"cannot open {primary} as a secondary"):
                self._db = Rdict(
                    str(primary),
                    Options(raw_mode=True),
                    access_type=AccessType.secondary(str(self._secondary)),
                )
            self._reader = ProjectionReader(self._db)

    @property
    def reader(self) -> ProjectionReader:
        """The projection's reader; reads without one are a ConfigError naming the fix."""
        if self._reader is None:
            raise self._no_projection()
        return self._reader

    @reader.setter
    def reader(self, value: ProjectionReader) -> None:
        self._reader = value

    def _no_projection(self) -> ConfigError:
        return ConfigError(
            "reads need a projection: pass --data DIR of a running claimgraph projector "
            f"(start one: claimgraph --bootstrap {self.cfg.bootstrap} --graph {self.name} "
            "--data DIR projector)"
        )

    @property
    def pins(self) -> PinRegistry:
        """Pins of live runs on this projection (GC of it never passes one)."""
        if self._projection_dir is None:
            raise ConfigError("pins live beside a projection: pass --data DIR of a projector")
        return PinRegistry(self._projection_dir)

    def close(self) -> None:
        with self._lag_lock:
            if self._lag_consumer is not None:
                self._lag_consumer.close()
                self._lag_consumer = None
        self.commands.close()
        if self._runs is not None:
            self._runs.close()
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._secondary is not None:
            shutil.rmtree(self._secondary, ignore_errors=True)

    def __enter__(self) -> KafkaGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------------------

    def _decisions_end(self) -> int:
        return watermark(self.cfg, self.cfg.decisions_topic, self.partition)

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Produce commands and wait for their decisions (read-your-writes)."""
        if not self._verified:  # a forged registry record must not take the writer over
            verified_placement(self.cfg, self.name, self._registry, wait=self.write_timeout)
            self._verified = True
        start = self._decisions_end()
        values = [c if isinstance(c, bytes) else encode_command(c) for c in commands]
        positions = self.commands.append(values)
        wanted = set(positions)
        found: dict[int, tuple[int, Decision]] = {}
        consumer = Consumer(
            self.cfg.client(
                **{
                    "group.id": "claimgraph-client",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        )
        try:
            consumer.assign([TopicPartition(self.cfg.decisions_topic, self.partition, start)])
            deadline = time.monotonic() + self.write_timeout
            while wanted - found.keys():
                if time.monotonic() > deadline:
                    raise StorageError(
                        f"no decision for {len(wanted - found.keys())} command(s) within "
                        f"{self.write_timeout:g}s: is a governor running for partition "
                        f"{self.partition}? (claimgraph governor --partition {self.partition})"
                    )
                for m in consumer.consume(num_messages=1000, timeout=0.2):
                    if m.error() is not None:
                        if m.error().code() != KafkaError._PARTITION_EOF:  # type: ignore[union-attr]
                            raise StorageError(str(m.error()))
                        continue
                    if m.key() != self.name.encode("utf-8"):
                        continue
                    d = decode_decision(m.value() or b"")
                    if d["input_offset"] in wanted:
                        found[d["input_offset"]] = (int(m.offset() or 0), d)
        finally:
            consumer.close()
        return [Receipt(found[p][1]["command_id"], p, found[p][0], found[p][1]) for p in positions]

    def _one(self, command: Command) -> Receipt:
        return self.submit([command])[0]

    def _one_signed(self, record: bytes) -> Receipt:
        return self.submit([record])[0]

    # -- versions -------------------------------------------------------------------------------

    def _erasures(self, log: KafkaLog) -> dict[str, int]:
        """Claim id → version of its erasure, from a scan of the decisions partition."""
        out: dict[str, int] = {}
        pos = 0
        while True:
            recs = log.read(pos, 10_000, timeout=2.0)
            if not recs:
                return out
            for rec in recs:
                if b"erase" in rec.value:  # cheap filter before decoding
                    d = decode_decision(rec.value)
                    if d["graph"] == self.name and d["reason"] == "erased" and d["target"]:
                        out[d["target"]] = rec.offset
            pos = recs[-1].offset + 1

    def _catch_up(self) -> None:
        if self._db is None:
            raise self._no_projection()
        with rocksdb_errors(f"cannot catch up with {self._projection_dir}"):
            catch_up(self._db)

    def head(self) -> int:
        self._catch_up()
        return ProjectionStore.applied_of(self.reader.db)

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            h = self.head()
            if version <= h:
                return h
            if time.monotonic() >= deadline:
                raise VersionNotYetAvailable(version, h, timeout)
            time.sleep(0.05)

    def projection_lag(self, timeout: float = 5.0) -> ProjectionLag:
        """The age of the oldest committed decision of this graph the projection has not
        applied (0: caught up), found by reading the decisions partition after the applied
        version up to its last committed record; a scan that cannot finish in ``timeout``
        seconds raises StorageError."""
        applied = self.head()
        key = self.name.encode("utf-8")
        with self._lag_lock:
            if self._lag_consumer is None:
                self._lag_consumer = Consumer(
                    self.cfg.client(
                        **{
                            "group.id": "claimgraph-lag",
                            "enable.auto.commit": False,
                            "isolation.level": "read_committed",
                            "enable.partition.eof": True,
                        }
                    )
                )
            consumer = self._lag_consumer
            consumer.assign([TopicPartition(self.cfg.decisions_topic, self.partition, applied + 1)])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for m in consumer.consume(num_messages=1000, timeout=0.2):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return ProjectionLag(applied, 0.0, False)
                        raise StorageError(f"reading {self.cfg.decisions_topic}: {err.str()}")
                    if m.key() == key:
                        age = time.time() - m.timestamp()[1] / 1000
                        return ProjectionLag(applied, max(0.0, age), True)
        raise StorageError(
            f"cannot read {self.cfg.decisions_topic}[{self.partition}] after version {applied} "
            f"within {timeout:g}s to measure the projection's lag"
        )

    def status(self) -> dict[str, Any]:
        return {
            "graph": self.name,
            "partition": self.partition,
            "bootstrap": self.cfg.bootstrap,
            "head": self.head() if self._db else None,
        }

    # -- runs: the PREFIX.runs topic, keyed by graph, in the graph's partition ---------------------

    def _runs_log(self) -> KafkaLog:
        if self._runs is None:
            self._runs = KafkaLog(self.cfg, self.cfg.runs_topic, self.partition, key=self.name)
        return self._runs

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        self._runs_log().append(encode_events(events))

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        log = self._runs_log()
        out: list[dict[str, Any]] = []
        start = 0
        while True:
            recs = log.read(start, 4096, timeout=2.0)
            if not recs:
                break
            events = decode_events(r.value for r in recs)
            out += [e for e in events if e["graph"] == self.name and run_id in (None, e["run_id"])]
            start = recs[-1].offset + 1
        return out

    def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]:
        from claimgraph.core.erasure import scrub_decision
        from claimgraph.projections.erasure import erased_at

        log = KafkaLog(self.cfg, self.cfg.decisions_topic, self.partition)
        if self._db is not None:
            db = self._db

            def erased(claim_id: str) -> int | None:
                return erased_at(db, claim_id)
        else:  # no projection to ask: find the erasures in the log itself
            found = self._erasures(log)

            def erased(claim_id: str) -> int | None:
                return found.get(claim_id)

        out = []
        for rec in log.read(start, limit * 4):
            d = scrub_decision(decode_decision(rec.value), erased)
            if d["graph"] == self.name:
                out.append((rec.offset, d))
            if len(out) >= limit:
                break
        return out


if TYPE_CHECKING:  # mypy checks that this graph implements the graph port

    def _conforms(g: KafkaGraph) -> GraphPort:
        return g
