"""Fault tests against real brokers: SIGKILLed governors and projectors, broker restarts."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from claimgraph.core.wire import decode_decision, encode_command
from claimgraph.errors import StorageError
from claimgraph.logs.kafka import KafkaConfig, KafkaLog, read_partition, watermark
from claimgraph.service.audit import compare_with_reprojection
from claimgraph.streams.kafka import KafkaGovernor, verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import SCHEMA
from tests.kafka_helpers import cli_process, decide_all, free_port, fresh_config, governor_thread
from tests.workload import record

STREAM = 100_000


def _schema_command() -> bytes:
    return encode_command(
        {
            "type": "publish_schema",
            "command_id": "schema-1",
            "graph": "test",
            "agent": "admin",
            "task": "",
            "document": SCHEMA,
            "source": "conftest",
        }
    )


def _decided_inputs(cfg: KafkaConfig, partition: int = 0) -> list[int]:
    recs = read_partition(cfg, cfg.decisions_topic, partition, 0, None, 30.0)
    return [decode_decision(rec.value)["input_offset"] for rec, _ in recs]


def _wait_progress(cfg: KafkaConfig, since: int, timeout: float) -> int:
    """Wait until the decisions partition grows past ``since``; return its end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        end = watermark(cfg, cfg.decisions_topic, 0)
        if end > since:
            return end
        time.sleep(0.2)
    return watermark(cfg, cfg.decisions_topic, 0)


def _wait_applied(p: subprocess.Popen[bytes], port: int, target: int) -> int:
    """Poll a running projector's metrics until its applied version reaches ``target``."""
    pattern = re.compile(rb"^claimgraph_applied_version\{[^}]*\} ([0-9.e+-]+)$", re.M)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                m = pattern.search(r.read())
        except OSError:
            m = None  # not serving yet
        if m is not None and float(m.group(1)) >= target:
            return int(float(m.group(1)))
        time.sleep(0.01)
    raise AssertionError(f"projector never reached version {target}")


def test_sigkill_governor_repeatedly_during_a_100k_stream(kafka_broker: Any) -> None:
    """>= 10 SIGKILLs of the governor mid-stream: exactly one decision per command; verify."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
    log.append([_schema_command()])

    def produce() -> None:
        for start in range(0, STREAM, 5000):
            log.append([record(i) for i in range(start, start + 5000)])

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    rnd = random.Random(447)
    kills = 0
    seen = 0
    while kills < 10:
        p = cli_process(cfg, "test", "governor", "--partition", "0", "--batch-size", "500")
        seen = _wait_progress(cfg, seen, timeout=120)
        time.sleep(rnd.uniform(0.0, 1.5))
        assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        kills += 1
    producer.join(300)
    assert not producer.is_alive()
    log.close()
    gov = KafkaGovernor(cfg, 0, batch_size=2000)
    gov.start()
    decide_all(gov, cfg)
    gov.close()
    inputs = _decided_inputs(cfg)
    total = STREAM + 2  # the graph's place record, the schema, the stream
    assert len(inputs) == total, "one decision per command, none lost"
    assert sorted(inputs) == list(range(total)), "none duplicated"
    assert inputs == sorted(inputs), "decided in log order"
    assert verify_partition(cfg, 0) == (total, total)


def test_sigkill_projector_mid_batch_then_audit(kafka_broker: Any, tmp_path: Path) -> None:
    """A projector killed mid-batch resumes from its stored offset; audit finds no difference."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
    log.append([_schema_command()])
    for start in range(0, 40_000, 10_000):
        log.append([record(i) for i in range(start, start + 10_000)])
    log.close()
    gov = KafkaGovernor(cfg, 0, batch_size=2000)
    gov.start()
    decide_all(gov, cfg)
    gov.close()
    data = tmp_path / "proj"
    rnd = random.Random(7)
    applied_seen = []
    target = 0
    for _ in range(4):
        # Kill once the projector is observed past a random point ahead of the last kill (its
        # applied version, read from its metrics), never after a guessed sleep: under load a
        # sleep can end before the first batch or after the last one.
        port = free_port()
        target += rnd.randrange(1_000, 8_000)
        p = cli_process(cfg, "test", "--data", str(data), "projector", "--metrics-port", str(port))
        applied = _wait_applied(p, port, target)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert applied >= target
        from claimgraph.projections.projector import ProjectionStore

        store = ProjectionStore(data / "projection")
        applied_seen.append(store.applied())
        store.close()
    end = watermark(cfg, cfg.decisions_topic, 0) - 2  # the last decision, then a marker
    deadline = time.monotonic() + 300

    def stalled(p: KafkaProjector, n: int) -> None:
        assert time.monotonic() < deadline, f"projector stalled at {p.applied} of {end}"

    proj = KafkaProjector(cfg, "test", data)
    proj.run(until=end, on_batch=stalled)  # caught up when observed, not after an idle spell
    last = proj.applied
    proj.close()
    assert last == end
    assert any(0 < a < last for a in applied_seen), f"no kill landed mid-stream: {applied_seen}"
    rows, head = compare_with_reprojection(cfg, "test", data)
    assert head == last and rows > 40_000


def _acknowledged_stream(
    cfg: KafkaConfig, stop: threading.Event, acked: list[int], total: int = 20_000
) -> threading.Thread:
    """Append ``total`` commands in small paced chunks, recording acknowledged offsets."""

    def run() -> None:
        log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
        i = 0
        while i < total and not stop.is_set():
            chunk = [record(j) for j in range(i, i + 200)]
            try:
                acked.extend(log.append(chunk))
                i += 200
            except StorageError:
                time.sleep(0.5)  # not acknowledged: may or may not be in the log
            time.sleep(0.05)
        log.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_all_decided(cfg: KafkaConfig, gov: Any = None, timeout: float = 240.0) -> None:
    """Wait until the governor has committed past the end of the commands partition (a
    governor run by ``governor_thread`` that died ends the wait at once, with its error)."""
    from confluent_kafka import Consumer, TopicPartition

    deadline = time.monotonic() + timeout
    c = Consumer(
        cfg.client(**{"group.id": f"{cfg.prefix}-governor-p0", "enable.auto.commit": False})
    )
    try:
        while time.monotonic() < deadline:
            died = getattr(gov, "thread_errors", None)
            if died:
                raise AssertionError(f"the governor stopped: {died[0]!r}")
            end = watermark(cfg, cfg.commands_topic, 0)
            done = c.committed([TopicPartition(cfg.commands_topic, 0)], timeout=10)[0].offset
            if done >= end:
                return
            time.sleep(0.5)
    finally:
        c.close()
    raise AssertionError("the governor did not catch up with the commands partition")


def _check_nothing_acknowledged_lost(cfg: KafkaConfig, acked: list[int]) -> None:
    commands = read_partition(cfg, cfg.commands_topic, 0, 0, None, 60.0)
    present = {rec.offset for rec, _ in commands}
    assert set(acked) <= present, "an acknowledged command was lost"
    inputs = _decided_inputs(cfg)
    assert sorted(inputs) == sorted(present), "every command has exactly one decision"
    assert len(inputs) == len(set(inputs))


def test_single_broker_restart_mid_stream(kafka_broker: Any) -> None:
    """Restarting the broker mid-stream loses no acknowledged command or decision."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    KafkaLog(cfg, cfg.commands_topic, 0, key="test").append([_schema_command()])
    stop = threading.Event()
    acked: list[int] = [0]
    with governor_thread(cfg, 0, batch_size=500) as gov:
        t = _acknowledged_stream(cfg, stop, acked)
        time.sleep(3)
        before = len(acked)
        kafka_broker.restart()
        t.join(300)
        assert len(acked) > before, "the stream went on after the restart"
        _wait_all_decided(cfg, gov)
        assert gov.stats.commands > 0
    _check_nothing_acknowledged_lost(cfg, acked)
    assert verify_partition(cfg, 0)[0] == len(_decided_inputs(cfg))


def test_one_of_three_brokers_down_mid_stream(kafka_cluster: Any) -> None:
    """With RF 3 and min ISR 2, stopping one broker mid-stream loses nothing acknowledged."""
    cfg = fresh_config(kafka_cluster.bootstrap, partitions=1, replication=3)
    KafkaLog(cfg, cfg.commands_topic, 0, key="test").append([_schema_command()])
    stop = threading.Event()
    acked: list[int] = [0]
    with governor_thread(cfg, 0, batch_size=500) as gov:
        t = _acknowledged_stream(cfg, stop, acked)
        time.sleep(3)
        victim = kafka_cluster.partition_leader(cfg.decisions_topic, 0)
        kafka_cluster.stop_node(victim)
        before = len(acked)
        t.join(300)
        assert len(acked) > before, "writes went on with two of three brokers"
        _wait_all_decided(cfg, gov)
        assert gov.stats.commands > 0
    _check_nothing_acknowledged_lost(cfg, acked)
