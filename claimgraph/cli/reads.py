"""CLI commands that read: head, log, verify, audit; and how the catalogued reads print.

The catalogued reads (get, slot, neighbors, history, quarantine, claim, log; paths and reach
in :mod:`claimgraph.cli.queries`) take their arguments from the query catalogue
(:mod:`claimgraph.cli.catalogue`); only their printers are here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from claimgraph.cli.catalogue import renders
from claimgraph.cli.common import (
    CTX,
    JsonOpt,
    app,
    emit,
    graph_session,
    out,
    progress,
)
from claimgraph.cli.kafka import audit_kafka, verify_kafka
from claimgraph.core.commands import cut
from claimgraph.core.governance import iso_utc
from claimgraph.errors import ConfigError, InputError, NotFoundError

# -- reads ------------------------------------------------------------------------------------


@app.command(rich_help_panel="Read")
def head(as_json: JsonOpt = False) -> None:
    """The newest version (the offset of the last applied decision; -1 when empty)."""
    with graph_session() as g:
        h = g.head()
        pending = g.pending() if hasattr(g, "pending") else 0
        if as_json:
            emit({"graph": g.name, "head": h, "pending": pending})
        else:
            out.print(
                f"{g.name}: head v{h}" + (f" ({pending} pending)" if pending else ""), markup=False
            )


def _slot_line(s: Any, edge_type: str, node: str) -> str:
    held = ", ".join(f"{t}:{i}" for t, i in s.nodes) or "nothing"
    line = f"v{s.version} {edge_type}({node}) → {held} [{s.state}]"
    if s.conflict_id:
        line += f" conflict={s.conflict_id}"
    if s.fallback is not None:
        line += f" fallback={s.fallback}"
    return line


@renders("edge", optional=("object",))
def get(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """Read an edge (present / absent / unknown) or, without OBJECT, a subject's slot."""
    edge_type, subject, obj = q["edge_type"], q["subject"], q["obj"]
    if obj is None:
        s = g.slot(edge_type, subject, at=at, timeout=wait)
        if as_json:
            emit(s.as_dict())
            return
        out.print(_slot_line(s, edge_type, subject), markup=False)
        return
    e = g.edge(edge_type, subject, obj, at=at, timeout=wait)
    if as_json:
        view = e.as_dict()
        view["claim_details"] = [g.claim_info(c, at=e.version) for c in e.claims]
        emit(view)
        return
    line = f"v{e.version} {edge_type}({subject} → {obj}): {e.state.upper()}"
    if e.conflict_id:
        line += f" (conflict {e.conflict_id})"
    if e.fallback is not None:
        line += f" fallback={e.fallback}"
    out.print(line, markup=False)
    for c in e.claims:
        info = g.claim_info(c, at=e.version) or {}
        out.print(
            f"  {info.get('polarity', '?')} by {info.get('agent', '?')}/"
            f"{info.get('task', '')} confidence {info.get('confidence', '?')} "
            f"claim {c}",
            markup=False,
        )


@renders("slot")
def slot(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """What an exclusive slot holds at a version (the subject's; --direction in: the object's)."""
    s = g.slot(**q, at=at, timeout=wait)
    if as_json:
        emit(s.as_dict())
        return
    out.print(_slot_line(s, q["edge_type"], q["node"]), markup=False)


@renders("neighbors")
def neighbors(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """A node's neighbours at a version (present and unknown edges), optionally filtered."""
    node, direction = q["node"], q["direction"]
    version = g.head() if at is None else at
    ns = g.neighbors(**q, at=version, timeout=wait)
    if as_json:
        emit(
            {
                "node": node,
                "direction": direction,
                "version": version,
                "neighbors": [n.as_dict() for n in ns],
            }
        )
        return
    table = Table(title=f"{node} {direction} at v{version}", title_justify="left")
    for col in ("edge type", "node", "state", "conflict", "claims"):
        table.add_column(col)
    for n in ns:
        table.add_row(
            n.edge_type,
            f"{n.node[0]}:{n.node[1]}",
            n.state,
            n.conflict_id or "",
            str(len(n.claims)),
        )
    out.print(table)
    if not ns:
        out.print("  (no neighbours)", markup=False)


@renders("history")
def history(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """Every decision that touched an edge, oldest first."""
    hs = g.history(**q, at=at, timeout=wait)
    if as_json:
        emit(hs.as_dict())
        return
    if hs.cut_below is not None:
        out.print(f"(cut: entries below version {hs.cut_below} were removed by gc)", markup=False)
    elif not hs:
        out.print("no history: no claim was ever made about this edge", markup=False)
    for h in hs:
        out.print(
            f"v{h['version']:<5} {h['kind']:<11} {h['reason']:<20} by "
            f"{h['agent']:<18} → {h['state']}"
            + (f" (conflict {h['conflict_id']})" if h["conflict_id"] else ""),
            markup=False,
        )


@renders("quarantine")
def quarantine(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """Conflicts withheld from the readable graph, with their claims."""
    version = g.head() if at is None else at
    cs = g.quarantine(**q, at=version, timeout=wait)
    if as_json:
        for c in cs:
            c["claim_details"] = [g.claim_info(x, at=version) for x in c["members"]]
        emit({"version": version, "conflicts": cs})
        return
    if not cs:
        out.print(f"v{version}: no open conflicts", markup=False)
    for c in cs:
        state = "open" if c["open"] else f"closed at v{c['closed_at']} ({c['outcome']})"
        if c["open"] and c.get("escalated_at") is not None:
            state = f"escalated at v{c['escalated_at']} ({c.get('escalation', '')})"
        out.print(
            f"{c['conflict_id']}  {c['edge_type']}  opened v{c['opened_at']}  {state}",
            markup=False,
        )
        for cid in c["members"]:
            info = g.claim_info(cid, at=version) or {}
            out.print(
                f"    {info.get('polarity', '?')} {info.get('subject_id', '?')} → "
                f"{info.get('object_id', '?')} by {info.get('agent', '?')} "
                f"(confidence {info.get('confidence', '?')}, "
                f"{info.get('status', '?')}) claim {cid}",
                markup=False,
            )


@renders("claim_info")
def claim_show(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """A claim's full record and status at a version: who said what, on what evidence."""
    claim_id = q["claim_id"]
    version = g.head() if at is None else at
    info = g.claim_info(claim_id, at=version) if version >= 0 else None
    if info is None:
        where = f"at v{version}" if version >= 0 else "(the graph has no decisions yet)"
        raise NotFoundError(f"no claim {cut(claim_id)} {where}")
    if as_json:
        emit(info)
        return
    for k in (
        "claim_id",
        "status",
        "since",
        "polarity",
        "edge_type",
        "subject_type",
        "subject_id",
        "object_type",
        "object_id",
        "agent",
        "task",
        "run_id",
        "confidence",
        "evidence",
        "reasoning",
        "asserted_at",
        "based_on_version",
        "properties",
    ):
        out.print(f"{k:>17}: {_readable(k, info.get(k))}", markup=False)


def _readable(key: str, value: object) -> str:
    """A claim field as a person reads it: times in ISO 8601 UTC, versions as ``vN``, lists
    and properties spelled out, ``-`` for none."""
    if value is None or value in ("", [], {}):
        return "-"
    if key == "asserted_at" and isinstance(value, int):
        return iso_utc(value)
    if key in ("since", "based_on_version") and isinstance(value, int):
        return f"v{value}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


@renders("decisions")
def log_cmd(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """The decisions log: what the governor decided, version by version."""
    for v, d in g.decisions(**q):
        if as_json:
            row = dict(d)
            row["version"] = v
            emit(row)
            continue
        what = ""
        c = d["claim"]
        if c is not None:
            what = f"{c['polarity']} {c['edge_type']}({c['subject_id']} → {c['object_id']})"
        elif d["target"]:
            what = f"{d['command_type']} {d['target']}"
        else:
            what = d["command_type"]
        out.print(
            f"v{v:<6} {d['kind']:<11} {d['reason']:<20} {d['agent'] or '-':<18} {what}",
            markup=False,
        )


# -- integrity --------------------------------------------------------------------------------


FromOpt = Annotated[int | None, typer.Option("--from", help="First version of a range.")]
ToOpt = Annotated[int | None, typer.Option("--to", help="Last version of a range.")]


@app.command(rich_help_panel="Versions and retention")
def verify(
    as_json: JsonOpt = False,
    start: FromOpt = None,
    end: ToOpt = None,
    digest: Annotated[
        str | None,
        typer.Option(
            "--digest", help="A digest kept earlier (claimgraph digest): check it at --to/head."
        ),
    ] = None,
) -> None:
    """Check the decisions hash chain, then re-run the governor over the commands log and
    compare decisions byte for byte (every version, or a --from/--to range)."""
    if CTX.bootstrap:
        if start is not None or end is not None:
            raise ConfigError("verify --from/--to is for the embedded runtime")
        verify_kafka(as_json)
        return
    from claimgraph.service.audit import verify as run_verify
    from claimgraph.service.chain import check_chain

    with graph_session() as g, progress("verify") as cb:
        if digest is not None:
            check_chain(g, upto=end, expect=digest)
        rep = run_verify(g, cb, start=start, end=end)
    if as_json:
        emit(rep.as_dict())
    else:
        out.print(
            f"verify ok: {rep.commands} commands → {rep.decisions} decisions, identical bytes",
            markup=False,
        )


@app.command(rich_help_panel="Versions and retention")
def audit(
    samples: Annotated[int, typer.Option(help="Versions to digest besides head.")] = 3,
    at: Annotated[int | None, typer.Option("--at", help="Compare this one version.")] = None,
    start: FromOpt = None,
    end: ToOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-project the decisions log into a fresh store and compare with the live graph
    (every retained version, a --from/--to range, or one version --at)."""
    if CTX.bootstrap:
        if at is not None or start is not None or end is not None:
            raise ConfigError("audit --at/--from/--to is for the embedded runtime")
        audit_kafka(as_json)
        return
    from claimgraph.service.audit import audit as run_audit

    if at is not None:
        if start is not None or end is not None:
            raise ConfigError("give --at or a --from/--to range, not both")
        start = end = at
    with graph_session() as g, progress("audit") as cb:
        rep = run_audit(g, cb, samples=samples, start=start, end=end)
    if as_json:
        emit(rep.as_dict())
    else:
        out.print(f"audit ok: {rep.rows} rows identical in v{rep.start}..v{rep.head}", markup=False)
        for v, dg in rep.digests.items():
            out.print(f"  digest at v{v}: {dg}", markup=False)


@app.command(rich_help_panel="Start")
def demo(
    into: Annotated[
        Path | None,
        typer.Option(help="Directory for the demo graph (recreated; default ./claimgraph-demo)."),
    ] = None,
    scenario: Annotated[
        str,
        typer.Option(
            help="inventory: the first article (ownership, deployments, quarantine); "
            "refunds: the second (agents deciding refunds, resolvers, fail-closed money)."
        ),
    ] = "inventory",
) -> None:
    """Run a scenario on the embedded runtime and narrate it (default: inventory)."""
    if scenario == "inventory":
        from claimgraph.demo.inventory import run_demo

        run_demo(into or Path("./claimgraph-demo"), say=lambda s: out.print(s, markup=False))
    elif scenario == "refunds":
        from claimgraph.demo.refunds import run_refunds_demo

        run_refunds_demo(
            into or Path("./claimgraph-demo-refunds"), say=lambda s: out.print(s, markup=False)
        )
    else:
        raise InputError(f"unknown scenario {cut(scenario)}; expected inventory or refunds")
