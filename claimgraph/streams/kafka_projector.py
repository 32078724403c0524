"""The projector on Kafka: a ``read_committed`` consumer of one graph's decisions partition.

It folds the graph's decisions (other graphs placed on the same partition are skipped) with
their real offsets as versions, and writes each batch of rows together with its applied
offset, like the embedded projector. On restart it re-folds the decisions up to the applied
offset without writing, then continues writing after it — or, when ``DIR/checkpoints`` holds
a usable checkpoint at or below the applied offset (:mod:`claimgraph.projections.checkpoints`),
starts
from its folded state and reads the partition only after it. Several projector processes may
serve one graph, each with its own projection directory.

The directory records the partition it projects (``graph.json``): a projector refuses to
resume on another partition, whatever the registry says now. Before it writes a row it checks
the graph's registry record against the log (the decision of its place record must be the
operator's, :func:`~claimgraph.logs.kafka_layout.verified_placement`) and stops if it is not.
"""

from __future__ import annotations

import gc
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from claimgraph.core.state import GraphState
from claimgraph.errors import ConfigError, IntegrityError, StorageError
from claimgraph.logconf import events
from claimgraph.logs.base import LogRecord
from claimgraph.logs.kafka import KafkaConfig, consumer_lag, read_partition
from claimgraph.logs.kafka_layout import check_layout, verified_placement
from claimgraph.native.batch import fold_batch
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.projections.rows import LAYOUT

__all__ = ["KafkaProjector", "ProjectedBatch"]

_log = events("projector")


@dataclass(frozen=True)
class ProjectedBatch:
    """What one projector batch wrote: for each decision, when it was logged and when its
    command was (ms since the epoch), and when the batch was written (s since the epoch)."""

    decided_ms: list[int]
    appended_ms: list[int]
    projected_at: float


class KafkaProjector:
    """Projects one graph from Kafka into a local versioned RocksDB projection."""

    def __init__(
        self,
        cfg: KafkaConfig,
        graph: str,
        path: Path,
        *,
        batch_size: int = 2000,
        use_checkpoints: bool = True,
        group: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.graph = graph
        self.key = graph.encode("utf-8")
        self.path = path
        self.batch_size = batch_size
        self._registry = check_layout(cfg)
        self.partition = self._registry.partition_of(graph)  # verified before the first row
        self._verified = False
        path.mkdir(parents=True, exist_ok=True)
        marker = path / "graph.json"
        info: dict[str, Any] = {
            "graph": graph,
            "runtime": "kafka",
            "bootstrap": cfg.bootstrap,
            "prefix": cfg.prefix,
        }
        if marker.exists():
            info = json.loads(marker.read_text())
            have = info.get("graph")
            if have != graph:
                raise ConfigError(f"{path} holds a projection of graph {have!r}")
            was = info.get("partition")
            if was is not None and was != self.partition:
                raise IntegrityError(
                    f"{path} projects graph {graph!r} from partition {was} of "
                    f"{cfg.decisions_topic}; the registry now names partition "
                    f"{self.partition}: a projection never resumes on another partition (a "
                    "placement never moves; check the registry with claimgraph kafka status)",
                    None,
                )
        if info.get("partition") != self.partition:
            info["partition"] = self.partition
            marker.write_text(json.dumps(info) + "\n")
        self.store = ProjectionStore(path / "projection", create=True)
        if self.store.outdated:  # rows of an older layout: project the partition again
            layout, applied = self.store.layout(), self.store.applied()
            self.store.close()
            shutil.rmtree(path / "projection")
            shutil.rmtree(self.checkpoints, ignore_errors=True)  # their projections are old too
            self.store = ProjectionStore(path / "projection", create=True)
            _log.info(
                "projection.upgrade",
                path=str(path),
                layout=layout,
                to=LAYOUT,
                decisions=applied + 1,
                how="re-projecting the decisions partition from its start",
            )
        self.state = GraphState(graph)
        self.applied_at_start = self.store.applied()
        self.resumed_from: int | None = None  # the checkpoint version the state started at
        self._last_value: bytes | None = None  # the decision record at self.state.head
        if use_checkpoints:
            from claimgraph.projections.checkpoints import resume

            found = resume(
                self.checkpoints,
                graph,
                self.applied_at_start,
                self._record_at,
                lambda path, why: _log.warning(
                    "projector.checkpoint_skipped", path=str(path), reason=why
                ),
            )
            if found is not None:
                self.state = found[1]
                self.resumed_from = found[0].version
        self.projector = Projector(self.store, self.state, index_inputs=True)
        self.projector.checkpoints = self.checkpoints
        self.projector.set_graph(graph)
        self.decisions = 0
        # the consumer group its position is committed to, for Kafka's own lag tools
        # (kafka-consumer-groups.sh); restarts resume from the projection, never from it
        self.group = group or f"{cfg.prefix}-projector-{graph}"
        self.position = -1  # the next record of the partition to read, once written
        self._committed = -1  # the position last committed to the group
        self.last_batch: ProjectedBatch | None = None
        self._consumer: Consumer | None = None
        self._stop = False

    def start(self) -> None:
        self._consumer = Consumer(
            self.cfg.client(
                **{
                    "group.id": self.group,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "fetch.max.bytes": 52428800,
                    "on_commit": self._on_commit,
                }
            )
        )
        start = 0 if self.resumed_from is None else self.resumed_from + 1
        self.position = start
        self._consumer.assign([TopicPartition(self.cfg.decisions_topic, self.partition, start)])
        _log.info(
            "projector.started",
            graph=self.graph,
            partition=self.partition,
            applied=self.applied_at_start,
            resumed_from=self.resumed_from,
            path=str(self.path),
        )

    def stop(self) -> None:
        self._stop = True

    @property
    def input(self) -> tuple[str, int]:
        """The topic and partition this projector reads (its lag is measured on it)."""
        return self.cfg.decisions_topic, self.partition

    def lag(self) -> int:
        """Records of the decisions partition not yet read."""
        if self._consumer is None:
            return 0
        return consumer_lag(self._consumer, self.cfg.decisions_topic, self.partition)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self.store.close()

    @property
    def applied(self) -> int:
        return self.store.applied()

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def _record_at(self, offset: int) -> bytes | None:
        """The committed decision record at ``offset`` of this graph's partition, if any."""
        recs = read_partition(self.cfg, self.cfg.decisions_topic, self.partition, offset, 1, 5.0)
        return recs[0][0].value if recs and recs[0][0].offset == offset else None

    def checkpoint(self, keep: int | None = 2) -> Any:
        """Checkpoint the projection and folded state at the applied offset; keep the ``keep``
        newest checkpoints (None: all)."""
        from claimgraph.projections.checkpoints import create_checkpoint, prune_checkpoints

        record = self._last_value
        if record is None:
            record = self._record_at(self.state.head)
        info = create_checkpoint(
            self.store, self.state, self.checkpoints, runtime="kafka", record=record
        )
        if keep is not None:
            prune_checkpoints(self.checkpoints, keep)
        return info

    def step(self, timeout: float = 0.1) -> int:
        """Fold one batch; write the rows of decisions above the applied offset."""
        if not self._verified:  # nothing is projected from a placement the log does not hold
            try:
                verified_placement(self.cfg, self.graph, self._registry, wait=timeout)
            except StorageError:
                return 0  # its place record is not decided yet: try again next step
            self._verified = True
        if self._consumer is None:
            self.start()
        assert self._consumer is not None
        msgs = self._next_batch(timeout)
        applied = self.applied_at_start
        position = self.position
        decided_ms: list[int] = []  # of each decision written: when it was logged
        appended_ms: list[int] = []  # ... and when its command was
        recs: list[LogRecord] = []  # this graph's decisions: (version, decided ms, bytes)

        def fold() -> int:
            """Fold ``recs`` in one batch call; stage the rows above the applied offset."""
            if not recs:
                return 0
            ds = fold_batch(self.state, recs, self.projector, applied)
            self._last_value = recs[-1].value
            self.decisions += len(recs)
            staged = 0
            for rec, d in zip(recs, ds, strict=True):
                if rec.offset > applied:
                    decided_ms.append(rec.timestamp)
                    appended_ms.append(d["log_time"])
                    staged += 1
            recs.clear()
            return staged

        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    position = max(position, int(m.offset() or 0))  # past trailing markers
                    continue
                fold()  # what was read before the error is folded, as it is read
                raise StorageError(f"projector consumer: {err.str()}")
            offset = int(m.offset() or 0)
            position = offset + 1
            if m.key() != self.key:
                continue
            recs.append(LogRecord(offset, int(m.timestamp()[1]), m.value() or b""))
        n = fold()
        self.projector.flush()
        if n:
            self.last_batch = ProjectedBatch(decided_ms, appended_ms, time.time())
        self.position = position
        if position != self._committed:
            self._commit_position(position)
        gc.freeze()  # the folded state is long-lived: keep it out of full collections
        return n

    def _next_batch(self, timeout: float) -> list[Any]:
        """Up to ``batch_size`` records: wait at most ``timeout`` for the first, then take what
        the consumer has already fetched. Never waits to fill a batch: a partial batch (the
        tail of a catch-up, a quiet partition) is projected at once, and a projector behind
        its partition still gets full batches from librdkafka's prefetch."""
        assert self._consumer is not None
        first = self._consumer.poll(timeout)
        if first is None:
            return []
        if self.batch_size <= 1:
            return [first]
        return [first, *self._consumer.consume(num_messages=self.batch_size - 1, timeout=0)]

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if err is not None:
            _log.warning("projector.commit_failed", graph=self.graph, error=err.str())
            self._committed = -1  # commit again after the next batch

    def _commit_position(self, position: int) -> None:
        """Commit the position to the projector's group (asynchronously, so a slow or absent
        coordinator never holds the projection back; a failed commit is retried next batch)."""
        assert self._consumer is not None
        tp = TopicPartition(self.cfg.decisions_topic, self.partition, position)
        try:
            self._consumer.commit(offsets=[tp], asynchronous=True)
        except KafkaException as exc:
            _log.warning("projector.commit_failed", graph=self.graph, error=str(exc))
            return
        self._committed = position

    def run(
        self,
        *,
        idle_exit: float | None = None,
        until: int | None = None,
        on_batch: Callable[[KafkaProjector, int], None] | None = None,
        checkpoint_every: int | None = None,
    ) -> int:
        """Project until stopped, until version ``until`` is applied, or idle ``idle_exit`` s.

        With ``checkpoint_every``, a checkpoint is written whenever that many decisions were
        projected since the last one (and the folded state has caught up with the store).
        """
        total = 0
        since_checkpoint = 0
        idle_since = time.monotonic()
        while not self._stop:
            n = self.step()
            total += n
            since_checkpoint += n
            if (
                checkpoint_every is not None
                and since_checkpoint >= checkpoint_every
                and self.state.head == self.applied
            ):
                info = self.checkpoint()
                _log.info("projector.checkpoint", graph=self.graph, version=info.version)
                since_checkpoint = 0
            if on_batch is not None:
                on_batch(self, n)
            if until is not None and self.applied >= until:
                break
            if n:
                idle_since = time.monotonic()
            elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                break
        return total
