"""Crash safety: SIGKILL the embedded runtime at random points, restart, check exactness."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import claimgraph
from claimgraph.core.wire import decode_decision
from claimgraph.service.audit import audit, verify
from tests.conftest import ROOT

TOTAL = 24_000  # 60 chunks of 400: twelve kills land 4-5 chunks apart


def _start(path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", str(path), str(TOTAL), "400"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _kill_when(p: subprocess.Popen[str], stage: str, target: int) -> bool:
    """SIGKILL the worker once it reports ``stage`` at ``target`` commands or more.

    The kill lands while the worker goes on to its next step (deciding the chunk it just
    appended, or appending the next one), at a point set by what it reported, not by a clock.
    Returns False if the worker finished first.
    """
    assert p.stdout is not None
    for line in p.stdout:
        kind, _, n = line.partition(" ")
        if kind == stage and int(n) >= target:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            return True
    p.wait()
    return False


def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """After >= 10 SIGKILLs mid-stream: one decision per command, verify and audit pass."""
    path = tmp_path / "g"
    rnd = random.Random(20261129)
    kills = 0
    progress = []
    while kills < 12:
        p = _start(path)
        # twelve kills spread over the stream, alternately during appends and during decisions
        target = (kills + 1) * TOTAL // 14 + rnd.randrange(400)
        if not _kill_when(p, rnd.choice(("appended", "processed")), target):
            break  # finished before the target: cannot happen with targets below TOTAL
        kills += 1
        # reopening recovers: folds the log, re-projects the tail (a kill may even have landed
        # before the directory was initialised)
        g = claimgraph.open(path, create=True, graph="test")
        progress.append((g.logs.commands.end(), g.head()))
        g.close()
    assert kills >= 10, f"only {kills} kills landed; the stream finished too fast"
    p = _start(path)
    p.communicate(timeout=600)
    assert p.returncode == 0
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
