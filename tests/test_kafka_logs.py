"""A broker outage under a running governor is a bounded number of log lines: librdkafka's
lines come through the clients' ``logger`` hook as JSON events, each printed once and then
counted (``log.repeated``), never a raw ``%3|...|FAIL|`` line per reconnect attempt."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import ROOT
from tests.kafka_helpers import fresh_config

INTERVAL = 1.0  # seconds between two reports of a repeating line (the default is 10)
COUNTED = 200  # librdkafka lines the outage lasts for (counted in log.repeated lines)


def _counted(events: list[dict[str, Any]]) -> int:
    """The Kafka clients' repeats counted in these events."""
    return sum(
        e["count"]
        for e in events
        if e["event"] == "log.repeated" and e["logger"] == "claimgraph.kafka"
    )


class _Lines:
    """A process's stderr, line by line as it comes (JSON parsed; anything else kept raw)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.raw: list[tuple[float, str]] = []
        self.events: list[tuple[float, dict[str, Any]]] = []
        self._new = threading.Condition()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            now = time.monotonic()
            with self._new:
                self.raw.append((now, line))
                with contextlib.suppress(ValueError):
                    self.events.append((now, json.loads(line)))
                self._new.notify_all()

    def wait(self, done: Callable[[list[dict[str, Any]]], bool], since: float = 0.0) -> None:
        """Until ``done`` holds for the events since ``since`` (or fail, with the output)."""

        def seen() -> list[dict[str, Any]]:
            return [e for t, e in self.events if t >= since]

        with self._new:
            self._new.wait_for(lambda: done(seen()) or self.proc.poll() is not None, 180)
            assert done(seen()), "".join(line for _, line in self.raw)

    def since(self, t: float) -> list[str]:
        with self._new:
            return [line for at, line in self.raw if at >= t]


def test_a_broker_outage_under_a_governor_is_a_bounded_number_of_lines(kafka_broker: Any) -> None:
    """The broker stops under a governor process for several report intervals: its stderr
    stays JSON, a handful of lines (the first of each distinct failure, then one count per
    interval and logger) while hundreds of librdkafka lines are counted, not printed."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--bootstrap", cfg.bootstrap, "--prefix", cfg.prefix,
         "--graph", "test", "--log-interval", str(INTERVAL), "governor", "--partition", "0"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = _Lines(proc)
    stopped = False
    try:
        lines.wait(lambda es: any(e["event"] == "governor.started" for e in es))
        t0 = time.monotonic()
        stopped = True
        kafka_broker.stop()
        lines.wait(lambda es: _counted(es) >= COUNTED, since=t0)
        during = lines.since(t0)
        elapsed = time.monotonic() - t0
        assert proc.poll() is None, "".join(during)  # it waits for the broker, as it should
    finally:
        if stopped:
            kafka_broker.start()  # same data and port: the next tests need it
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    events = [json.loads(line) for line in during]  # every line is one JSON object
    assert all(e["ts"] and e["level"] and e["logger"] and e["event"] for e in events)
    assert not any(line.startswith("%") for line in during)
    counted = _counted(events)
    intervals = math.ceil(elapsed / INTERVAL)
    # the first occurrence of each distinct line (a dozen), then at most one report per
    # interval for each logger that repeats (the Kafka clients', the lag timer's, ...)
    assert len(events) <= 25 + 3 * intervals, (elapsed, [e["event"] for e in events])
    assert counted >= COUNTED  # what would have been printed: one line per attempt
    print(f"outage of {elapsed:.1f}s: {len(events)} lines, {counted} librdkafka lines counted")
