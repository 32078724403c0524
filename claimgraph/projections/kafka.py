"""The projector on Kafka: a ``read_committed`` consumer of one graph's decisions partition.

It folds the graph's decisions (other graphs hashed to the same partition are skipped) with
their real offsets as versions, and writes each batch of rows together with its applied
offset, like the embedded projector. On restart it re-folds the decisions up to the applied
offset without writing, then continues writing after it. Several projector processes may
serve one graph, each with its own projection directory.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from ..errors import ClaimgraphError
from ..fold import GraphState
from ..logs.kafka import KafkaConfig, consumer_lag, partition_for, topic_partitions
from ..wire import decode_decision
from .projector import ProjectionStore, Projector

__all__ = ["KafkaProjector"]


def _log(event: str, **fields: Any) -> None:
    print(
        json.dumps({"ts": round(time.time(), 3), "event": event, **fields}),
        file=sys.stderr,
        flush=True,
    )


class KafkaProjector:
    """Projects one graph from Kafka into a local versioned RocksDB projection."""

    def __init__(self, cfg: KafkaConfig, graph: str, path: Path, *, batch_size: int = 2000) -> None:
        self.cfg = cfg
        self.graph = graph
        self.key = graph.encode("utf-8")
        self.path = path
        self.batch_size = batch_size
        parts = topic_partitions(cfg, cfg.decisions_topic)
        self.partition = partition_for(graph, parts)
        path.mkdir(parents=True, exist_ok=True)
        marker = path / "graph.json"
        if marker.exists():
            have = json.loads(marker.read_text()).get("graph")
            if have != graph:
                raise ClaimgraphError(f"{path} holds a projection of graph {have!r}")
        else:
            marker.write_text(
                json.dumps(
                    {
                        "graph": graph,
                        "runtime": "kafka",
                        "bootstrap": cfg.bootstrap,
                        "prefix": cfg.prefix,
                    }
                )
                + "\n"
            )
        self.store = ProjectionStore(path / "projection", create=True)
        self.state = GraphState(graph)
        self.projector = Projector(self.store, self.state, index_inputs=True)
        self.projector.set_graph(graph)
        self.applied_at_start = self.store.applied()
        self.decisions = 0
        self._consumer: Consumer | None = None
        self._stop = False

    def start(self) -> None:
        self._consumer = Consumer(
            self.cfg.client(
                **{
                    "group.id": f"{self.cfg.prefix}-projector",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "fetch.max.bytes": 52428800,
                }
            )
        )
        self._consumer.assign([TopicPartition(self.cfg.decisions_topic, self.partition, 0)])
        _log(
            "projector.started",
            graph=self.graph,
            partition=self.partition,
            applied=self.applied_at_start,
            path=str(self.path),
        )

    def stop(self) -> None:
        self._stop = True

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

    def step(self, timeout: float = 0.1) -> int:
        """Fold one batch; write the rows of decisions above the applied offset."""
        if self._consumer is None:
            self.start()
        assert self._consumer is not None
        msgs = self._consumer.consume(num_messages=self.batch_size, timeout=timeout)
        applied = self.applied_at_start
        n = 0
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise ClaimgraphError(f"projector consumer: {err.str()}")
            if m.key() != self.key:
                continue
            offset = int(m.offset() or 0)
            d = decode_decision(m.value() or b"")
            ch = self.state.evolve(d, offset)
            if offset > applied:
                self.projector.stage(offset, d, ch)
                n += 1
            self.decisions += 1
        self.projector.flush()
        gc.freeze()  # the folded state is long-lived: keep it out of full collections
        return n

    def run(
        self,
        *,
        idle_exit: float | None = None,
        on_batch: Callable[[KafkaProjector, int], None] | None = None,
    ) -> int:
        """Project until stopped (or idle for ``idle_exit`` seconds)."""
        total = 0
        idle_since = time.monotonic()
        while not self._stop:
            n = self.step()
            total += n
            if on_batch is not None:
                on_batch(self, n)
            if n:
                idle_since = time.monotonic()
            elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                break
        return total
