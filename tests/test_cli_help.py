"""`claimgraph --help` a person can scan: commands in panels, first sentences whole, a
`--version` naming the core, and a bare `claimgraph` that prints the help and exits 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import typer.main

from claimgraph import __version__
from claimgraph.cli.common import PANELS, first_sentence
from claimgraph.cli.main import app
from tests.conftest import ROOT

CLI = [sys.executable, "-m", "claimgraph"]


def _run(*args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns))
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )


def _unwrapped(help_text: str) -> str:
    """The help with its wrapped lines joined (click wraps to the terminal's width, also
    after a hyphen)."""
    return re.sub(r"(?<=\w)- (?=\w)", "-", " ".join(help_text.split()))


def test_every_command_is_in_one_of_the_panels() -> None:
    """Each top-level command names a panel of PANELS, and every panel holds a command."""
    root = typer.main.get_command(app)
    panels = {name: getattr(cmd, "rich_help_panel", None) for name, cmd in root.commands.items()}  # type: ignore[attr-defined]
    assert {n for n, p in panels.items() if p not in PANELS} == set()
    assert set(panels.values()) == set(PANELS)


def test_help_lists_the_panels_in_order_with_each_command_under_its_own() -> None:
    """`claimgraph --help` shows the panels in PANELS order, `demo` in the first one."""
    r = _run("--help")
    assert r.returncode == 0, r.stderr
    headings = [line[:-1] for line in r.stdout.splitlines() if line[:-1] in PANELS]
    assert headings == list(PANELS)
    start = r.stdout.split("\nStart:\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^  demo\s", start, flags=re.M), start


def test_first_sentences_are_whole_in_every_listing() -> None:
    """Every group's listing shows each command's first sentence entire, at any width."""
    root = typer.main.get_command(app)
    groups = [("claimgraph", root)]
    groups += [(n, c) for n, c in root.commands.items() if hasattr(c, "commands")]  # type: ignore[attr-defined]
    for columns in (60, 200):
        for name, group in groups:
            ctx = typer.Context(group, info_name=name, terminal_width=columns)  # type: ignore[arg-type]
            shown = _unwrapped(group.get_help(ctx))
            for sub, cmd in group.commands.items():  # type: ignore[attr-defined]
                sentence = first_sentence(cmd.help)
                assert sentence.endswith((".", ")")), (name, sub, sentence)
                assert f"{sub} {sentence}" in shown, (name, sub, columns)


def test_first_sentence_stops_at_the_first_full_stop_of_the_first_paragraph() -> None:
    """A help text's first sentence: across its wrapped lines, up to the first full stop."""
    assert first_sentence("Prune the projection: reads\nstay. Never passes a pin.") == (
        "Prune the projection: reads stay."
    )
    assert first_sentence("One line, no stop\n\nSecond paragraph.") == "One line, no stop"
    assert first_sentence("Use e.g. this one. Then.") == "Use e.g. this one."


def test_version_prints_the_package_version_and_the_core_loaded() -> None:
    """`claimgraph --version` names the version pyproject.toml gives and the core in use."""
    r = _run("--version")
    assert r.returncode == 0, r.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == __version__
    from claimgraph import native

    first, second = r.stdout.splitlines()
    assert re.fullmatch(rf"claimgraph {re.escape(version)} \((native|python) core\)", first)
    assert second == str(native.status())  # the build, and why it is stale if it is
    pure = subprocess.run(
        [*CLI, "--version"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT), CLAIMGRAPH_PURE="1"),
    )  # fmt: skip
    assert pure.stdout == f"claimgraph {version} (python core)\ncore: python: CLAIMGRAPH_PURE=1\n"


def test_a_bare_claimgraph_prints_the_help_and_exits_0() -> None:
    """No arguments: the help on stdout, exit 0 (a group without its command too)."""
    r = _run()
    assert r.returncode == 0, r.stderr
    assert r.stdout == _run("--help").stdout
    kafka = _run("kafka")
    assert kafka.returncode == 0 and "Commands:" in kafka.stdout, kafka.stderr


def test_version_is_no_configuration_key() -> None:
    """--version is not a value `config show` reports or a config file may set."""
    r = _run("config", "show")
    assert r.returncode == 0, r.stderr
    assert not re.search(r"^version\s", r.stdout, flags=re.M), r.stdout
