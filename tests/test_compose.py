"""The compose deployment parses (without an engine) and only runs commands the CLI has."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from claimgraph.cli.main import app
from tests.conftest import ROOT

COMPOSE = ROOT / "compose" / "docker-compose.yml"


def _config() -> dict[str, object]:
    tool = shutil.which("docker-compose")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose (Debian package) is needed to validate compose/")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    out = subprocess.run(
        [tool, "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=COMPOSE.parent,
    )
    assert out.returncode == 0, out.stderr
    parsed: dict[str, object] = yaml.safe_load(out.stdout)
    return parsed


def _check_cli_args(args: list[str]) -> None:
    """The CLI accepts the command and its options (``--help`` stops before running it)."""
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, f"claimgraph {' '.join(args)}: {result.output}"


def test_compose_file_is_valid_and_runs_real_commands() -> None:
    """docker-compose config accepts the file; every claimgraph command in it parses."""
    cfg = _config()
    services = cfg["services"]
    assert isinstance(services, dict)
    assert {"kafka", "topics", "governor", "projector"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    checked = 0
    for name, svc in services.items():
        if svc.get("image") != "claimgraph:local":
            continue
        _check_cli_args(list(svc["command"]))
        assert svc["environment"]["CLAIMGRAPH_BOOTSTRAP"] == "kafka:9092", name
        checked += 1
    assert checked >= 4


def test_bad_commands_are_caught() -> None:
    """The command check itself fails on a command or option the CLI does not have."""
    with pytest.raises(AssertionError):
        _check_cli_args(["governor", "--no-such-option"])
    with pytest.raises(AssertionError):
        _check_cli_args(["teleport"])
