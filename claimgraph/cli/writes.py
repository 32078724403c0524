"""CLI commands that write: init, schema, submit, assert/deny, retract, resolve, grant, revoke."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import IO, Annotated

import typer

from claimgraph.cli.catalogue import AGENT, add_write
from claimgraph.cli.common import (
    CTX,
    AgentOpt,
    AtOpt,
    JsonOpt,
    app,
    emit,
    emit_lines,
    err,
    graph_session,
    out,
    print_receipt,
    progress,
    schema_app,
)
from claimgraph.core.schema import fail_closed_warnings
from claimgraph.errors import ClaimgraphError, NotFoundError
from claimgraph.service.attached import local_graph
from claimgraph.service.bounded import INPUT_LIMITS, InputLimits
from claimgraph.service.graph import Graph
from claimgraph.service.jsonlines import line_record, read_lines
from claimgraph.service.schemas import load_schema_file

# -- set-up -----------------------------------------------------------------------------------


@app.command(rich_help_panel="Start")
def init(
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph", "-g", help="Name of the graph (default: the global --graph, else 'default')."
        ),
    ] = None,
) -> None:
    """Create an empty graph in the data directory (idempotent)."""
    with local_graph(CTX.data, create=True, graph=graph or CTX.graph) as g:
        head = g.head()
        where = f"head v{head}" if head >= 0 else "empty, no decisions yet (the first is v0)"
        out.print(f"graph {g.name!r} in {g.path}: {where}", markup=False)


@schema_app.command("check")
def schema_check(file: Annotated[Path, typer.Argument(help="A schema YAML file.")]) -> None:
    """Validate a schema file locally, without publishing it."""
    s = load_schema_file(str(file))
    out.print(
        f"{file}: valid — {len(s.node_types)} node types, {len(s.edge_types)} edge "
        f"types, digest {s.digest}",
        markup=False,
    )
    for name, why in fail_closed_warnings(s):
        err.print(f"warning: {name} cannot fail closed: {why}", markup=False)


@schema_app.command("apply")
def schema_apply(
    file: Annotated[Path, typer.Argument(help="A schema YAML file.")],
    agent: AgentOpt = "admin",
    as_json: JsonOpt = False,
) -> None:
    """Publish a schema through the log (as an admin principal)."""
    load_schema_file(str(file))  # precise, local errors before anything is written
    text = file.read_text(encoding="utf-8")
    with graph_session() as g:
        r = g.publish_schema(text, agent=agent, source=file.name)
        print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


@schema_app.command("show")
def schema_show(at: AtOpt = None, as_json: JsonOpt = False) -> None:
    """Show the schema in force at a version."""
    with graph_session() as g:
        row = g.schema_info(at=at)
        if row is None:
            raise NotFoundError("no schema has been published yet")
        if as_json:
            emit(row)
        else:
            out.print(
                f"# revision {row['revision']} ({row['digest']}) from {row['source']}", markup=False
            )
            out.print(row["document"], markup=False)


# -- writes -----------------------------------------------------------------------------------


@app.command(rich_help_panel="Write")
def submit(
    file: Annotated[str, typer.Argument(help="JSON Lines file of commands, or - for stdin.")],
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Default agent for lines that name none.")
    ] = None,
    batch: Annotated[
        int, typer.Option(min=1, max=100_000, help="Commands decided per synced write.")
    ] = 2048,
    strict: Annotated[bool, typer.Option(help="Exit 1 if any command was rejected.")] = False,
    max_line: Annotated[
        int, typer.Option("--max-line", min=1, help="Longest line read, in bytes.")
    ] = INPUT_LIMITS.max_line,
    max_depth: Annotated[
        int, typer.Option("--max-depth", min=1, help="Deepest JSON nesting of a line.")
    ] = INPUT_LIMITS.max_depth,
) -> None:
    """Submit JSON Lines of commands; print one JSON decision per non-blank input line.

    Whatever a line holds (not JSON, too long, too deep, not a command, numbers the wire
    cannot carry), it is recorded: as its command, or as an ``invalid_input`` record that the
    governor rejects as ``malformed`` with the line number and the error. Nothing is
    dropped and one bad line never stops the file. Blank lines are skipped and counted.
    """
    limits = InputLimits(max_line=max_line, max_depth=max_depth)
    stream = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    total = _size_of(stream)
    rejected = blank = decided = 0
    first = 0  # the line number of the chunk's first command
    chunk: list[bytes] = []
    try:
        with graph_session() as g, progress("submit") as shown:
            for lineno, raw, size in read_lines(stream, max_line):
                if size <= max_line and not raw.strip():
                    blank += 1
                    continue
                first = first or lineno
                chunk.append(line_record(raw, lineno, g.name, agent, limits, size=size))
                if len(chunk) >= batch:
                    rejected += _submit_chunk(g, chunk)
                    decided, chunk, first = decided + len(chunk), [], 0
                    if total:
                        shown(stream.tell(), total)
            if chunk:
                rejected += _submit_chunk(g, chunk)
                decided, chunk = decided + len(chunk), []
    except ClaimgraphError:
        if chunk:  # say where the file stopped: a write decides its whole chunk or none of it
            err.print(
                f"submit stopped at line {first}: its chunk of {len(chunk)} command(s) and "
                f"every line after it were not decided; the {decided} command(s) before were "
                "(their decisions are printed)",
                markup=False,
            )
        raise
    finally:
        sys.stdout.flush()
        if stream is not sys.stdin.buffer:
            stream.close()
    if blank:
        err.print(f"{blank} blank line(s) skipped", markup=False)
    if rejected:
        err.print(f"{rejected} command(s) rejected", markup=False)
        if strict:
            raise typer.Exit(1)


def _size_of(stream: IO[bytes]) -> int:
    """The input's size in bytes when it is a regular file (for progress), else 0."""
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _submit_chunk(g: Graph, chunk: list[bytes]) -> int:
    receipts = g.submit(chunk)
    emit_lines(r.as_dict() for r in receipts)
    return sum(r.kind == "rejected" for r in receipts)


# The writes as the write catalogue declares them (claimgraph.cli.catalogue.write_command):
# only their command names, help texts and the command line's own defaults are written here.
_CLAIM_HELP = """{verb}

SUBJECT and OBJECT are nodes as type:id. A time is ms since the epoch or ISO 8601 text.
"""
add_write(
    app, "assert", "assert_", _CLAIM_HELP.format(verb="Assert that an edge holds."), panel="Write"
)
add_write(
    app,
    "deny",
    "deny",
    _CLAIM_HELP.format(verb="Deny that an edge holds (a claim of absence)."),
    panel="Write",
)
add_write(
    app,
    "retract",
    "retract",
    "Withdraw one's own claim: it leaves head and stays readable at older versions.",
    panel="Write",
)
add_write(
    app,
    "resolve",
    "resolve",
    """A resolver's verdict on a quarantined or escalated conflict: a winner or reject all.

    The verdict is recorded as the --agent's unless --resolver names another. In fail-closed
    domains (payment, refund, permission) only principals.humans may pick an outcome other than
    the conservative ones.
    """,
    panel="Govern",
    defaults={"resolver": AGENT},
)
add_write(
    app, "grant", "grant", "Grant extra write scope for an edge type (admin only).", panel="Govern"
)
add_write(app, "revoke", "revoke", "Revoke a grant (admin only).", panel="Govern")
