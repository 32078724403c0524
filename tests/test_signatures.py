"""Signatures a tool generator can read: no **kw on public writers and reads; typos fail."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from claimgraph.sdk.aio import AsyncGraph
from claimgraph.sdk.aio_runs import AsyncRun
from claimgraph.sdk.http import HttpGraph
from claimgraph.service.graph import Graph
from claimgraph.service.port import GraphAPI
from claimgraph.service.runs import Run
from tests.conftest import ROOT


@pytest.mark.parametrize("cls", [GraphAPI, Graph, HttpGraph, Run, AsyncGraph, AsyncRun])
def test_no_public_method_takes_var_keywords(cls: type) -> None:
    """Every public method names its parameters (a generator can list them); the one read
    operation ``read(name, **params)`` and the one write operation ``write(name, **params)``
    are the exceptions: the query and write catalogues list each one's parameters, and the
    typed methods generated from them name them."""
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") or name in ("read", "write"):
            continue
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{cls.__name__}.{name}"


def test_a_typo_is_a_type_error(graph: Graph) -> None:
    """confdence= is refused at run time, by the graph and by a run."""
    with pytest.raises(TypeError, match="confdence"):
        graph.assert_("owns", "service:a", "database:d", agent="inventory", confdence=0.5)  # type: ignore[call-arg]
    with graph.run(agent="inventory") as run, pytest.raises(TypeError, match="confdence"):
        run.deny("owns", "service:a", "database:d", confdence=0.5)  # type: ignore[call-arg]


def test_a_typo_is_a_mypy_error(tmp_path: Path) -> None:
    """mypy --strict reports confdence= on assert_ as an unexpected keyword argument."""
    snippet = tmp_path / "typo.py"
    snippet.write_text(
        "import claimgraph\n"
        "g = claimgraph.open('x')\n"
        "g.assert_('owns', 'service:a', 'database:d', agent='a', confdence=0.5)\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'Unexpected keyword argument "confdence"' in r.stdout
