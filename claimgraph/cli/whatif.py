"""``claimgraph schema what-if``: what a proposed schema would have decided, before publishing.

It reads the data directory's logs read-only (a RocksDB secondary, no lock, nothing written
under the directory: :mod:`claimgraph.service.whatif_run`), so it runs beside ``serve``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.common import CTX, AgentOpt, JsonOpt, emit, progress, say, schema_app
from claimgraph.errors import ConfigError
from claimgraph.service.schemas import load_schema_file
from claimgraph.service.whatif import FIRST, Bounds
from claimgraph.service.whatif_run import run_what_if

__all__ = ["render", "schema_what_if"]


@schema_app.command("what-if")
def schema_what_if(
    file: Annotated[str, typer.Argument(help="The proposed schema's YAML file, or - for stdin.")],
    start: Annotated[
        int | None,
        typer.Option(
            "--from",
            help="The first version decided under the proposal (default: the version after "
            "the schema in force was published).",
            show_default=False,
        ),
    ] = None,
    end: Annotated[
        int | None,
        typer.Option(
            "--to", help="The last version decided again (default: head).", show_default=False
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1, help="Decide at most this many commands again.", show_default=False
        ),
    ] = None,
    seconds: Annotated[
        float | None,
        typer.Option(
            "--seconds",
            min=0.001,
            help="Stop after this many seconds; the report says where it stopped.",
            show_default=False,
        ),
    ] = None,
    first: Annotated[
        int, typer.Option("--first", min=0, help="Entries listed per category.")
    ] = FIRST,
    agent: AgentOpt = "admin",
    as_json: JsonOpt = False,
) -> None:
    """Replay the logged commands under a proposed schema and list what it would decide differently.

    The proposal is in force from --from without taking a version; decisions are matched by
    command. Nothing is written: the logs are read as a secondary, so this runs beside serve.
    Exits 1 when publishing the proposal would be refused (at --from, or now).
    """
    if CTX.bootstrap:
        raise ConfigError(
            "schema what-if reads an embedded graph's logs (--data); it does not run on the "
            "Kafka runtime yet"
        )
    if file == "-":
        document, source = sys.stdin.read(), "<stdin>"
    else:
        load_schema_file(file)  # precise, local errors first (as schema apply)
        document, source = Path(file).read_text(encoding="utf-8"), Path(file).name
    bounds = Bounds(start=start, end=end, limit=limit, seconds=seconds, first=first)
    with progress("what-if") as cb:
        report = run_what_if(
            CTX.data, document, source=source, agent=agent, bounds=bounds, progress=cb
        )
    if as_json:
        emit(report)
    else:
        for line in render(report):
            say(line)
    now = report["now"]
    if report["stopped"] == "refused" or (now is not None and now["kind"] == "rejected"):
        raise typer.Exit(1)


_TITLES = (
    ("rejected", "newly rejected"),
    ("quarantined", "newly quarantined"),
    ("accepted", "newly accepted"),
    ("other", "otherwise changed"),
)


def render(r: dict[str, Any]) -> list[str]:
    """The report as text: a summary, then each category's count and first entries."""
    p = r["proposal"]
    lines = [
        f"what-if of {p['source']} over graph {r['graph']!r} (head v{r['head']}), in force "
        f"from v{r['from']} without taking a version"
    ]
    lines.append(f"  publishing it at v{p['at']} as {p['agent']}: {_publishing(p)}")
    if r["stopped"] == "refused":
        return [*lines, "  nothing was decided again"]
    if p["kind"] is None:
        return [*lines, "  stopped by --seconds before the range: nothing was decided again"]
    span = f"v{r['from']}..v{r['to']}" if r["to"] >= r["from"] else "no version"
    lines.append(f"  decided again: {span}, {r['commands']} commands; {_differ(r['changed'])}")
    if r["stopped"] == "limit":
        lines.append(
            f"  stopped by --limit at v{r['to']} (the range goes on to v{r['requested_to']})"
        )
    elif r["stopped"] == "time":
        lines.append(
            f"  stopped by --seconds at v{r['to']} (the range goes on to v{r['requested_to']})"
        )
    now = r["now"]
    if now is not None:
        lines.append(f"  publishing it now (after v{now['at'] - 1}): {_publishing(now)}")
    for key, title in _TITLES:
        lines += _listing(title, r["decisions"][key], _change)
    lines += _listing("resolves and escalations no longer needed", r["no_longer_needed"], _verdict)
    lines += _listing("conflicts that appear", r["conflicts"]["appear"], _conflict)
    lines += _listing("conflicts that vanish", r["conflicts"]["vanish"], _conflict)
    lines += _listing("slots whose value at the end differs", r["slots"], _slot)
    lines += _listing("edges whose state at the end differs", r["edges"], _edge)
    lines.append(f"later schemas published in the range (applied as logged): {len(r['publishes'])}")
    for n in r["publishes"]:
        rev = f" revision {n['revision']}" if n["revision"] is not None else ""
        line = (
            f"  v{n['version']} publish_schema by {n['agent']}: {n['kind']}{rev}, applied as logged"
        )
        if n["what_if"] is not None:
            w = n["what_if"]
            line += f" (under the proposal it would be {w['kind']}: {w['reason']})"
        lines.append(line)
    return lines


def _differ(n: int) -> str:
    return f"{n} decision differs" if n == 1 else f"{n} decisions differ"


def _publishing(p: dict[str, Any]) -> str:
    if p["kind"] is None:
        return "not decided"
    return "accepted" if p["kind"] == "accepted" else f"refused ({p['reason']}: {p['detail']})"


def _listing(title: str, listing: dict[str, Any], line: Any) -> list[str]:
    out = [f"{title}: {listing['count']}"]
    out += [f"  {line(e)}" for e in listing["first"]]
    more = listing["count"] - len(listing["first"])
    if more > 0:
        out.append(f"  ... and {more} more (--first, or --json)")
    return out


def _state(d: dict[str, Any]) -> str:
    c = f" {d['conflict_id']}" if d["conflict_id"] else ""
    return f"{d['kind']} {d['reason']}{c}"


def _change(e: dict[str, Any]) -> str:
    edge = f" {e['edge']}" if e["edge"] else ""
    who = f"{e['agent']}/{e['task']}" if e["task"] else e["agent"]
    w = e["what_if"]
    why = f" — {w['detail']}" if w["detail"] else ""
    return (
        f"v{e['version']} {e['command_type']} {e['command_id']} by {who}{edge}: "
        f"{_state(e['logged'])} -> {_state(w)}{why}"
    )


def _verdict(e: dict[str, Any]) -> str:
    return f"v{e['version']} {e['command_type']} {e['command_id']} by {e['agent']}: {e['detail']}"


def _conflict(e: dict[str, Any]) -> str:
    state = "open at the end" if e["open"] else "closed"
    return (
        f"{e['conflict_id']} ({e['edge_type']}, opened v{e['opened_at']}, {state}): "
        f"claims {', '.join(e['claims'])}"
    )


def _slot(e: dict[str, Any]) -> str:
    return f"{e['slot']}: {e['logged']} -> {e['what_if']}"


def _edge(e: dict[str, Any]) -> str:
    return f"{e['edge']}: {e['logged']} -> {e['what_if']}"
