"""Helpers for the Kafka tests: a fresh topic prefix, a governor thread, CLI processes, a
reader that waits for decisions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from claimgraph.core.model import Decision
from claimgraph.core.wire import decode_decision
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
    gov.thread_errors = errors  # type: ignore[attr-defined]  # a waiter sees it die at once
    try:
        yield gov
    finally:
        gov.stop()
        t.join(30)
        gov.close()
    if errors:
        raise errors[0]


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class Decisions:
    """A read_committed reader of one decisions partition, by input offset: what a test waits
    on instead of sleeping."""

    def __init__(self, cfg: KafkaConfig, partition: int) -> None:
        self.consumer = Consumer(
            cfg.client(
                **{
                    "group.id": "test-decisions-reader",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                }
            )
        )
        self.consumer.assign([TopicPartition(cfg.decisions_topic, partition, 0)])
        self.by_input: dict[int, list[tuple[bytes | None, Decision, int]]] = {}

    def until(self, offsets: set[int], seconds: float = 60.0) -> None:
        """Read until every input offset has a decision (fails naming those that have none
        after ``seconds`` without a new record: a stalled partition)."""
        waited = 0.0
        while not offsets <= self.by_input.keys():
            msgs = self.consumer.consume(num_messages=1000, timeout=0.5)
            waited = 0.0 if msgs else waited + 0.5
            assert waited < seconds, f"no decision for {sorted(offsets - self.by_input.keys())}"
            for m in msgs:
                assert m.error() is None, m.error()
                d = decode_decision(m.value() or b"")
                self.by_input.setdefault(d["input_offset"], []).append(
                    (m.key(), d, int(m.offset() or 0))
                )

    def close(self) -> None:
        self.consumer.close()


def wait_all_decided(cfg: KafkaConfig, partition: int = 0, timeout: float = 180.0) -> int:
    """Wait until every command of the partition has its decision (a governor must be running
    or have run); return the number of decisions. Observed, never an idle spell."""
    from claimgraph.logs.kafka import read_partition, watermark

    deadline = time.monotonic() + timeout
    while True:
        want = watermark(cfg, cfg.commands_topic, partition)  # no transactions: one per command
        have = len(read_partition(cfg, cfg.decisions_topic, partition))
        if have >= want:
            return have
        assert time.monotonic() < deadline, f"{have} of {want} commands decided"
        time.sleep(0.05)


def decide_all(gov: KafkaGovernor, cfg: KafkaConfig) -> int:
    """Run a started governor until it has decided every command in its partition."""
    from claimgraph.logs.kafka import read_partition, watermark

    want = watermark(cfg, cfg.commands_topic, gov.partition) - len(
        read_partition(cfg, cfg.decisions_topic, gov.partition)
    )
    return gov.run(max_commands=want) if want > 0 else 0


def project_all(proj: Any, cfg: KafkaConfig, timeout: float = 180.0) -> int:
    """Run a projector until it has applied its graph's last decision, once every command is
    decided; return the applied version."""
    from claimgraph.logs.kafka import read_partition

    wait_all_decided(cfg, proj.partition, timeout)
    mine = [
        rec.offset
        for rec, key in read_partition(cfg, cfg.decisions_topic, proj.partition)
        if key == proj.key
    ]
    if not mine:
        return int(proj.applied)
    end = mine[-1]
    deadline = time.monotonic() + timeout

    def stalled(p: Any, n: int) -> None:
        assert time.monotonic() < deadline, f"projector stalled at {p.applied} of {end}"

    proj.run(until=end, on_batch=stalled)
    return int(proj.applied)


def wait_projected(data: Path, version: int, env: dict[str, str], timeout: float = 180.0) -> int:
    """Until the projector writing ``data`` has applied ``version`` (as ``claimgraph head``
    reports it, through the same configuration ``env`` gives the CLI); its head."""
    deadline = time.monotonic() + timeout
    last = "no projection yet"
    while True:
        if (data / "projection").exists():
            r = subprocess.run(
                [sys.executable, "-m", "claimgraph", "--data", str(data), "head", "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode == 0:
                head = int(json.loads(r.stdout)["head"])
                if head >= version:
                    return head
                last = f"head v{head}"
            else:
                last = r.stderr.strip()
        assert time.monotonic() < deadline, f"{data} never reached v{version} ({last})"
        time.sleep(0.2)
