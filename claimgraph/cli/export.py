"""``claimgraph export``: the graph at a version, with claim provenance, for other tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from claimgraph.cli.common import AtOpt, app, err, graph_session

__all__ = ["register"]


def export_cmd(
    fmt: Annotated[str, typer.Option("--format", "-f", help="jsonl | graphml | parquet")] = "jsonl",
    at: AtOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write here (parquet needs a file).")
    ] = None,
) -> None:
    """Export every edge readable at a version (present and unknown), each with its claims'
    owner, task, confidence, evidence and decision version."""
    from claimgraph.service.export import export

    with graph_session() as g:
        v = g.head() if at is None else at
        n = export(g, fmt, out if out is not None else sys.stdout, v)
    err.print(f"exported {n} edges at v{v} as {fmt}" + (f" to {out}" if out else ""), markup=False)


def register(root: typer.Typer = app) -> None:
    """Add ``export`` to the CLI."""
    root.command("export", rich_help_panel="Read")(export_cmd)
