"""Crash safety: SIGKILL the embedded runtime at random points, restart, check exactness."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import claimgraph
from claimgraph.core.wire import decode_decision
from claimgraph.service.audit import audit, verify
from tests.conftest import ROOT

TOTAL = 60_000


def _start(path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", str(path), str(TOTAL), "400"],
        cwd=ROOT,
        env=env,
    )


def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """After >= 10 SIGKILLs mid-stream: one decision per command, verify and audit pass."""
    path = tmp_path / "g"
    rnd = random.Random(20261129)
    kills = 0
    progress = []
    while kills < 12:
        p = _start(path)
        time.sleep(rnd.uniform(0.3, 1.0))
        if p.poll() is not None:
            break  # finished before we could kill it
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        kills += 1
        # reopening recovers: folds the log, re-projects the tail (a kill may even have landed
        # before the directory was initialised)
        g = claimgraph.open(path, create=True, graph="test")
        progress.append((g.logs.commands.end(), g.head()))
        g.close()
    assert kills >= 10, f"only {kills} kills landed; the stream finished too fast"
    p = _start(path)
    assert p.wait(timeout=600) == 0
    g = claimgraph.open(path)
    try:
        n_commands = g.logs.commands.end()
        assert n_commands == TOTAL + 1
        decisions = g.logs.decisions.read(0, n_commands + 10)
        assert len(decisions) == n_commands
        offsets = [decode_decision(r.value)["input_offset"] for r in decisions]
        assert offsets == list(range(n_commands)), "one decision per command, in order"
        assert g.head() == n_commands - 1
        verify(g)
        audit(g, samples=4)
    finally:
        g.close()
    # the kills landed at different stages of the stream
    assert len({c for c, _ in progress}) > 3
