"""Metrics of the governor and projector against a real broker: committed counts only, a lag
that keeps moving while a transaction stalls, the projector's group offsets, live owners."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry

from claimgraph.logs.kafka import KafkaConfig, KafkaLog, watermark
from claimgraph.streams.kafka import KafkaGovernor, live_governors
from claimgraph.streams.kafka_projector import KafkaProjector
from claimgraph.streams.metrics import GovernorMetrics, LagWatcher, ProjectorMetrics
from tests.conftest import ROOT
from tests.kafka_helpers import cli_process, decide_all, fresh_config
from tests.test_kafka_faults import _schema_command
from tests.workload import record


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def until(
    check: Callable[[], bool], what: str, seconds: float = 60.0, show: Callable[[], Any] = str
) -> None:
    """Poll ``check`` until it holds (an observed event, bounded generously)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never observed: {what} ({show()})"
        time.sleep(0.02)


class FlakyGovernor(KafkaGovernor):
    """A real governor whose first transaction fails after producing half its decisions
    (the broker then aborts them for real), or that blocks inside a transaction on demand."""

    def __init__(self, *args: Any, fail_once: bool = False, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.fail_once = fail_once
        self.produced = 0
        self.stall = threading.Event()  # set: the next produce blocks until release is set
        self.stalled = threading.Event()
        self.release = threading.Event()

    def _produce(self, producer: Any, graph: str, value: bytes, cb: Any) -> None:
        if self.stall.is_set():
            self.stalled.set()
            assert self.release.wait(120), "the test never released the stalled transaction"
            self.stall.clear()
        super()._produce(producer, graph, value, cb)
        self.produced += 1
        if self.fail_once and self.produced == 3:
            self.fail_once = False
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "injected: broker away"))


@contextmanager
def running(gov: KafkaGovernor) -> Iterator[KafkaGovernor]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            gov.run()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield gov
    finally:
        gov.stop()
        t.join(60)
        gov.close()
    if errors:
        raise errors[0]


def test_decisions_total_counts_committed_decisions_only(kafka_broker: Any) -> None:
    """A transaction aborted after producing decisions is decided again; every counter
    counts each command once (commands, decisions by kind), and the abort is counted."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
    log.append([_schema_command(), *(record(i) for i in range(40))])
    log.close()
    gov = FlakyGovernor(cfg, 0, fail_once=True, batch_size=10)
    metrics = GovernorMetrics(None, 0)
    gov.on_batch = metrics.update
    gov.start()
    decide_all(gov, cfg)
    gov.close()
    total = 42  # the place record, the schema, 40 commands
    assert gov.stats.aborts == 1 and gov.produced > total  # some decisions were produced twice
    decisions = sum(
        v.value
        for m in metrics.registry.collect()
        if m.name == "claimgraph_decisions"
        for v in m.samples
        if v.name == "claimgraph_decisions_total"
    )
    assert decisions == total
    assert sample(metrics.registry, "claimgraph_commands_total", partition="0") == total
    assert sample(metrics.registry, "claimgraph_transaction_aborts_total", partition="0") == 1
    latency = "claimgraph_decision_latency_seconds_count"
    assert sample(metrics.registry, latency, partition="0") == total


def _group_offset(cfg: KafkaConfig, group: str) -> int:
    admin = AdminClient(cfg.client())
    req = ConsumerGroupTopicPartitions(group)
    result = admin.list_consumer_group_offsets([req])[group].result(timeout=20)
    offsets = [tp.offset for tp in result.topic_partitions if tp.topic == cfg.decisions_topic]
    return offsets[0] if offsets else -1


def test_lag_keeps_moving_while_a_transaction_stalls(kafka_broker: Any, tmp_path: Any) -> None:
    """Both processes measure lag the same way (log end − committed position) on a timer: the
    governor's grows while its transaction is stuck, the projector's counts only committed
    decisions; the projector's position is committed to its consumer group."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
    log.append([_schema_command(), *(record(i) for i in range(10))])
    gov = FlakyGovernor(cfg, 0, batch_size=100)
    gmetrics = GovernorMetrics(None, 0)
    gov.on_batch = gmetrics.update
    gov.start()
    gwatch = gmetrics.watch(gov, interval=0.05)
    proj = KafkaProjector(cfg, "test", tmp_path / "proj")
    pmetrics = ProjectorMetrics(None, "test")
    pwatch = pmetrics.watch(proj, interval=0.05)

    glag = lambda: sample(gmetrics.registry, "claimgraph_consumer_lag", partition="0")  # noqa: E731
    plag = lambda: sample(pmetrics.registry, "claimgraph_consumer_lag", graph="test")  # noqa: E731

    def lag(watch: LagWatcher, position: Callable[[], int], want: int) -> Callable[[], bool]:
        """A check: the lag gauge, set after ``position()`` was last read, equals ``want``."""
        gauge = glag if watch is gwatch else plag
        seen = [-1, -1]  # the position and the measurement count when it was read

        def check() -> bool:
            if position() != seen[0]:
                seen[:] = [position(), watch.measurements]
                return False
            return watch.measurements > seen[1] + 1 and gauge() == want

        return check

    def at_end() -> bool:
        n = proj.step()
        pmetrics.update(proj, n)
        return proj.position == watermark(cfg, cfg.decisions_topic, 0)

    try:
        with running(gov):
            until(lambda: gov.position == 12, "every command decided")
            until(lag(gwatch, lambda: gov.position, 0), "the governor's lag at 0")
            # reading on to the end (the partition's EOF) takes it past the commit marker
            until(at_end, "the projector at the end of its input")
            until(lag(pwatch, lambda: proj.position, 0), "the projector's lag at 0")
            end = proj.position
            assert end > proj.applied + 1  # a commit marker follows the last decision
            until(lambda: _group_offset(cfg, proj.group) == end, "the group offset at the end")
            progress = sample(
                gmetrics.registry, "claimgraph_last_progress_timestamp_seconds", partition="0"
            )
            gov.stall.set()
            log.append([record(i) for i in range(10, 15)])
            assert gov.stalled.wait(60), "the governor never began the transaction"
            log.append([record(i) for i in range(15, 35)])
            until(lag(gwatch, lambda: gov.position, 25), "lag growing while the transaction stalls")
            # uncommitted decisions are not in the projector's input yet
            until(lag(pwatch, lambda: proj.position, 0), "the projector's lag still 0")
            assert not at_end() or proj.position == end
            assert progress == sample(
                gmetrics.registry, "claimgraph_last_progress_timestamp_seconds", partition="0"
            )
            gov.release.set()
            until(lambda: gov.position == 37, "every command decided after the stall")
            until(lag(gwatch, lambda: gov.position, 0), "the governor's lag back at 0")
            until(at_end, "the projector at the end of its input again")
            until(lag(pwatch, lambda: proj.position, 0), "the projector's lag back at 0")
            until(lambda: _group_offset(cfg, proj.group) == proj.position, "the group offset")
            assert proj.applied > end
    finally:
        gmetrics.close()
        pmetrics.close()
        proj.close()
        log.close()
    e2e = "claimgraph_end_to_end_latency_seconds_count"
    assert sample(pmetrics.registry, e2e, graph="test") == 37  # every decision projected


def _status(cfg: KafkaConfig) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = ["--bootstrap", cfg.bootstrap, "--prefix", cfg.prefix, "--graph", "test"]
    out = subprocess.run(
        [sys.executable, "-m", "claimgraph", *args, "kafka", "status"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=True,
    )  # fmt: skip
    return out.stdout


def test_kafka_status_never_names_a_dead_governor(kafka_broker: Any) -> None:
    """kafka status names the governor while it runs; once it is SIGKILLed it says no
    governor runs (naming the last one that committed), never a dead owner as the owner."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    KafkaLog(cfg, cfg.commands_topic, 0, key="test").append([_schema_command()])
    p = cli_process(cfg, "test", "governor", "--partition", "0")
    try:
        until(lambda: any(o.endswith(f":{p.pid}") for o in live_governors(cfg, [0])[0]),
              "the governor in its presence group", 120)  # fmt: skip
        out = _status(cfg)
        assert f":{p.pid} (alive)" in out, out
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    until(lambda: live_governors(cfg, [0])[0] == [], "the dead governor gone", 120)
    out = _status(cfg)
    assert "(alive)" not in out and "no governor running (last: " in out and f":{p.pid})" in out
