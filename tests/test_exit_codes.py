"""The CLI's exit codes are the README's table, for every command: not found is 9 everywhere,
and a write decided ``rejected`` exits 1 after printing its receipt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLI = [sys.executable, "-m", "claimgraph"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("exits")
    assert _run(["--data", "g", "init"], d).returncode == 0
    schema = str(ROOT / "schemas/graphs/inventory.yaml")
    applied = _run(["--data", "g", "schema", "apply", schema, "--agent", "platform-admin"], d)
    assert applied.returncode == 0, applied.stderr
    return d


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["claim", "nope"], "no claim 'nope'"),
        (["escalations", "cf:nope"], "no conflict 'cf:nope'"),
        (["runs", "show", "nope"], "no run 'nope'"),
        (["runs", "replay", "nope"], "no run 'nope'"),
        (["checkpoint", "restore"], "no checkpoints"),
        (["pin", "remove", "nope"], "no live pin 'nope'"),
    ],
)
def test_not_found_exits_9(graph: Path, args: list[str], phrase: str) -> None:
    r = _run(["--data", "g", *args], graph)
    assert r.returncode == 9, (args, r.returncode, r.stderr)
    assert phrase in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["key", "revoke", "nope", "--agent", "platform-admin"],
        ["key", "register", "k1", "00" * 32, "--for", "*", "--agent", "nobody"],
        ["retract", "nope", "--agent", "inventory-agent"],
    ],
)
def test_a_rejected_write_exits_1_with_its_receipt(graph: Path, args: list[str]) -> None:
    r = _run(["--data", "g", *args], graph)
    assert r.returncode == 1, (args, r.returncode, r.stdout, r.stderr)
    assert "REJECTED" in r.stdout
