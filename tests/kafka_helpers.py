"""Helpers for the Kafka tests: a fresh topic prefix, a governor thread, CLI processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from claimgraph.logs.kafka import KafkaConfig
from claimgraph.logs.kafka_layout import init_topics, place_graph
from claimgraph.streams.kafka import KafkaGovernor
from tests.conftest import ROOT


def fresh_config(
    bootstrap: str, partitions: int = 2, replication: int = 1, graphs: Sequence[str] = ("test",)
) -> KafkaConfig:
    """A KafkaConfig with a new topic prefix, topics created and ``graphs`` placed (each
    graph's first command is its ``place`` record)."""
    cfg = KafkaConfig(
        bootstrap,
        prefix=f"t{uuid.uuid4().hex[:10]}",
        partitions=partitions,
        replication=replication,
    )
    init_topics(cfg)
    for graph in graphs:
        place_graph(cfg, graph)
    return cfg


@contextmanager
def governor_thread(cfg: KafkaConfig, partition: int, **kw: Any) -> Iterator[KafkaGovernor]:
    """Run a governor in a thread for the duration of the block."""
    gov = KafkaGovernor(cfg, partition, **kw)
    gov.start()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            gov.run()
        except BaseException as exc:  # surfaced after the block
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield gov
    finally:
        gov.stop()
        t.join(30)
        gov.close()
    if errors:
        raise errors[0]


def cli_process(cfg: KafkaConfig, graph: str, *args: str) -> subprocess.Popen[bytes]:
    """Start `claimgraph --bootstrap ... <args>` as a separate process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "claimgraph",
            "--bootstrap",
            cfg.bootstrap,
            "--prefix",
            cfg.prefix,
            "--graph",
            graph,
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
