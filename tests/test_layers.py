"""The folders are the layers: imports point inward only and no siblings import in a cycle.

The contracts live in pyproject.toml (import-linter); ``make lint`` runs them too. These
tests also prove the check can fail: a copy of the package with one upward import planted
inside a function (where every cycle used to hide) breaks the contract.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_package_keeps_its_layers_and_has_no_cycles() -> None:
    """Both contracts (layers, acyclic siblings) are kept by the package as it is."""
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" KEPT") == 2 and "BROKEN" not in r.stdout


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    """core importing the CLI, even inside a function, is reported (so the check can fail)."""
    shutil.copytree(ROOT / "claimgraph", tmp_path / "claimgraph")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "claimgraph" / "core" / "model.py"
    model.write_text(
        model.read_text() + "\n\ndef _planted() -> None:\n    from claimgraph.cli import main\n"
    )
    r = _lint(tmp_path)
    assert r.returncode != 0
    assert "claimgraph.core.model -> claimgraph.cli" in r.stdout
