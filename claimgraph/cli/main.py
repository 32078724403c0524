"""The ``claimgraph`` command line: a thin shell over the service layer.

Errors exit non-zero with one clear line (exit codes come from the error classes in
:mod:`claimgraph.errors`); ``--json`` makes every read print JSON for scripts.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from claimgraph.core.model import LIMITS
from claimgraph.core.wire import encode_command
from claimgraph.errors import ClaimgraphError, ConfigError, InputError, SchemaError
from claimgraph.service.graph import DEFAULT_GRAPH, Graph, Receipt, open_graph
from claimgraph.service.inputs import now_millis, parse_command
from claimgraph.service.schemas import load_schema_file

if TYPE_CHECKING:
    from claimgraph.logs.kafka import KafkaConfig

__all__ = ["app", "main"]

app = typer.Typer(
    name="claimgraph",
    help="A governed, event-sourced knowledge graph for multi-agent systems.\n\n"
    "Every edge is a claim; every read is at a version. Start with: claimgraph demo",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
schema_app = typer.Typer(
    help="Validate, publish and show the graph schema (policy).", no_args_is_help=True
)
app.add_typer(schema_app, name="schema")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class _Ctx:
    data: Path = Path("./claimgraph-data")
    bootstrap: str | None = None
    graph: str = DEFAULT_GRAPH
    prefix: str = "claimgraph"

    def kafka(self) -> KafkaConfig:
        from claimgraph.logs.kafka import KafkaConfig

        if not self.bootstrap:
            raise ConfigError(
                "this command needs a Kafka cluster: --bootstrap HOST:PORT "
                "(or CLAIMGRAPH_BOOTSTRAP)"
            )
        return KafkaConfig(self.bootstrap, prefix=self.prefix)


CTX = _Ctx()

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
AtOpt = Annotated[
    int | None,
    typer.Option("--at", help="Read at this version (default: head).", show_default=False),
]
WaitOpt = Annotated[float, typer.Option("--wait", help="Seconds to wait for --at to arrive.")]
AgentOpt = Annotated[
    str,
    typer.Option(
        "--agent",
        "-a",
        help="The principal issuing the command (trusted locally; HTTP authenticates it).",
    ),
]
TaskOpt = Annotated[str, typer.Option("--task", "-t", help="The task the agent acts in.")]


@app.callback()
def _root(
    data: Annotated[
        Path,
        typer.Option("--data", "-d", envvar="CLAIMGRAPH_DATA", help="Data directory of the graph."),
    ] = Path("./claimgraph-data"),
    bootstrap: Annotated[
        str | None,
        typer.Option(
            "--bootstrap",
            "-b",
            envvar="CLAIMGRAPH_BOOTSTRAP",
            help="Kafka bootstrap servers: use the Kafka runtime instead of the "
            "embedded one (--data is then a projector's directory).",
        ),
    ] = None,
    graph: Annotated[
        str,
        typer.Option(
            "--graph", "-g", envvar="CLAIMGRAPH_GRAPH", help="Graph name (Kafka runtime)."
        ),
    ] = DEFAULT_GRAPH,
    prefix: Annotated[
        str, typer.Option("--prefix", envvar="CLAIMGRAPH_PREFIX", help="Kafka topic prefix.")
    ] = "claimgraph",
) -> None:
    CTX.data = data
    CTX.bootstrap = bootstrap
    CTX.graph = graph
    CTX.prefix = prefix


@contextmanager
def _graph(progress_label: str | None = None) -> Iterator[Any]:
    if CTX.bootstrap:
        from claimgraph.service.kafka_graph import KafkaGraph

        projection = CTX.data if (CTX.data / "projection").exists() else None
        kg = KafkaGraph(CTX.kafka(), CTX.graph, projection)
        try:
            yield kg
        finally:
            kg.close()
        return
    if progress_label:
        with _progress(progress_label) as cb:
            g = open_graph(CTX.data, progress=cb)
    else:
        g = open_graph(CTX.data)
    try:
        yield g
    finally:
        g.close()


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, shown only for long work."""
    bar = Progress(
        TextColumn(f"{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None)

    def cb(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield cb


def _emit(obj: Any) -> None:
    out.print(json.dumps(obj, ensure_ascii=False, default=str), markup=False)


def _decision_line(r: Receipt) -> str:
    d = r.decision
    parts = [f"v{r.version}", d["kind"].upper(), d["reason"]]
    if d["conflict_id"]:
        parts.append(f"conflict={d['conflict_id']}")
    if d["stale"]:
        parts.append("stale")
    line = " ".join(parts)
    if d["detail"]:
        line += f" — {d['detail']}"
    return f"{line}\n  command {d['command_id']} ({d['command_type']})"


def _print_receipt(r: Receipt, as_json: bool) -> None:
    if as_json:
        _emit(r.as_dict())
    else:
        out.print(_decision_line(r), markup=False)


def _when(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


# -- set-up -----------------------------------------------------------------------------------


@app.command()
def init(
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph", "-g", help="Name of the graph (default: the global --graph, else 'default')."
        ),
    ] = None,
) -> None:
    """Create an empty graph in the data directory (idempotent)."""
    g = open_graph(CTX.data, create=True, graph=graph or CTX.graph)
    try:
        out.print(f"graph {g.name!r} in {g.path} at version {g.head()}", markup=False)
    finally:
        g.close()


@schema_app.command("check")
def schema_check(file: Annotated[Path, typer.Argument(help="A schema YAML file.")]) -> None:
    """Validate a schema file locally, without publishing it."""
    s = load_schema_file(str(file))
    out.print(
        f"{file}: valid — {len(s.node_types)} node types, {len(s.edge_types)} edge "
        f"types, digest {s.digest}",
        markup=False,
    )


@schema_app.command("apply")
def schema_apply(
    file: Annotated[Path, typer.Argument(help="A schema YAML file.")],
    agent: AgentOpt = "admin",
    as_json: JsonOpt = False,
) -> None:
    """Publish a schema through the log (as an admin principal)."""
    load_schema_file(str(file))  # precise, local errors before anything is written
    text = file.read_text(encoding="utf-8")
    with _graph() as g:
        r = g.publish_schema(text, agent=agent, source=file.name)
        _print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


@schema_app.command("show")
def schema_show(at: AtOpt = None, as_json: JsonOpt = False) -> None:
    """Show the schema in force at a version."""
    with _graph() as g:
        row = g.schema_info(at=at)
        if row is None:
            raise ClaimgraphError("no schema has been published yet")
        if as_json:
            _emit(row)
        else:
            out.print(
                f"# revision {row['revision']} ({row['digest']}) from {row['source']}", markup=False
            )
            out.print(row["document"], markup=False)


# -- writes -----------------------------------------------------------------------------------


@app.command()
def submit(
    file: Annotated[str, typer.Argument(help="JSON Lines file of commands, or - for stdin.")],
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Default agent for lines that name none.")
    ] = None,
    batch: Annotated[int, typer.Option(help="Commands decided per batch.")] = 1000,
    strict: Annotated[bool, typer.Option(help="Exit 1 if any command was rejected.")] = False,
) -> None:
    """Submit JSON Lines of commands; print one JSON decision per input line.

    Lines that are not valid commands are recorded as rejected (reason ``malformed``), so
    every line gets exactly one decision and nothing is silently dropped.
    """
    stream = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    rejected = 0
    try:
        with _graph() as g:
            chunk: list[bytes] = []
            lineno = 0
            for raw in stream:
                lineno += 1
                if not raw.strip():
                    continue
                chunk.append(_to_record(raw, lineno, g.name, agent))
                if len(chunk) >= batch:
                    rejected += _submit_chunk(g, chunk)
                    chunk = []
            if chunk:
                rejected += _submit_chunk(g, chunk)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if rejected:
        err.print(f"{rejected} command(s) rejected", markup=False)
        if strict:
            raise typer.Exit(1)


def _to_record(raw: bytes, lineno: int, graph: str, agent: str | None) -> bytes:
    try:
        obj = json.loads(raw)
        if isinstance(obj, dict) and agent and "agent" not in obj:
            obj["agent"] = agent
        return encode_command(parse_command(obj, graph))
    except (InputError, ValueError, TypeError) as exc:
        msg = str(exc) if isinstance(exc, InputError) else f"not JSON: {exc}"
        command_id = ""
        if isinstance(obj := _loose(raw), dict) and isinstance(obj.get("command_id"), str):
            command_id = obj["command_id"][: LIMITS["id"]]
        return encode_command(
            {
                "type": "invalid_input",
                "command_id": command_id,
                "graph": graph,
                "agent": agent or "",
                "task": "",
                "raw": raw[: LIMITS["raw"]],
                "error": f"line {lineno}: {msg}"[: LIMITS["detail"]],
            }
        )


def _loose(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _submit_chunk(g: Graph, chunk: list[bytes]) -> int:
    rejected = 0
    for r in g.submit(chunk):
        _emit(r.as_dict())
        rejected += r.kind == "rejected"
    return rejected


def _claim_cmd(polarity: str) -> Callable[..., None]:
    def command(
        edge_type: Annotated[str, typer.Argument(help="Edge type, e.g. deployment_target.")],
        subject: Annotated[str, typer.Argument(help="Subject node as type:id.")],
        obj: Annotated[str, typer.Argument(metavar="OBJECT", help="Object node as type:id.")],
        agent: AgentOpt = ...,  # type: ignore[assignment]
        task: TaskOpt = "",
        confidence: Annotated[float, typer.Option(help="Confidence in [0, 1].")] = 1.0,
        evidence: Annotated[
            list[str] | None, typer.Option("--evidence", "-e", help="A data source (repeatable).")
        ] = None,
        reasoning: Annotated[str, typer.Option(help="Why the agent believes it.")] = "",
        asserted_at: Annotated[
            str | None, typer.Option(help="Event time (ISO 8601 or ms); default now.")
        ] = None,
        based_on: Annotated[
            int | None,
            typer.Option("--based-on", help="The version the agent read before claiming."),
        ] = None,
        prop: Annotated[
            list[str] | None, typer.Option("--prop", help="A property as key=value (repeatable).")
        ] = None,
        run_id: Annotated[str | None, typer.Option("--run", help="Run id.")] = None,
        command_id: Annotated[str | None, typer.Option("--id", help="Command id.")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        props = {}
        for p in prop or []:
            k, sep, v = p.partition("=")
            if not sep:
                raise InputError(f"--prop {p!r}: expected key=value")
            props[k] = v
        obj_json = {
            "type": polarity,
            "edge_type": edge_type,
            "subject": subject,
            "object": obj,
            "agent": agent,
            "task": task,
            "confidence": confidence,
            "evidence": evidence or [],
            "reasoning": reasoning,
            "asserted_at": _when(asserted_at) or now_millis(),
            "based_on_version": based_on,
            "properties": props,
            "run_id": run_id,
            "command_id": command_id,
        }
        with _graph() as g:
            r = g.submit([parse_command(obj_json, g.name)])[0]
            _print_receipt(r, as_json)
            if r.kind == "rejected":
                raise typer.Exit(1)

    command.__doc__ = (
        "Assert that an edge holds."
        if polarity == "assert"
        else "Deny that an edge holds (a claim of absence)."
    )
    return command


app.command("assert")(_claim_cmd("assert"))
app.command("deny")(_claim_cmd("deny"))


@app.command()
def retract(
    claim_id: Annotated[str, typer.Argument(help="The claim (its command id).")],
    agent: AgentOpt = ...,  # type: ignore[assignment]
    task: TaskOpt = "",
    reason: Annotated[str, typer.Option(help="Why it is withdrawn.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Withdraw one's own claim: it leaves head and stays readable at older versions."""
    with _graph() as g:
        r = g.retract(claim_id, agent=agent, task=task, reason=reason)
        _print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


@app.command()
def resolve(
    conflict_id: Annotated[str, typer.Argument(help="The conflict, e.g. cf:...")],
    agent: AgentOpt = ...,  # type: ignore[assignment]
    winner: Annotated[str | None, typer.Option(help="The winning claim id.")] = None,
    reject_all: Annotated[bool, typer.Option("--reject-all", help="Reject every claim.")] = (False),
    rationale: Annotated[str, typer.Option(help="Why.")] = "",
    resolver: Annotated[
        str, typer.Option(help="Which resolver this verdict is (recorded in the log).")
    ] = "human",
    as_json: JsonOpt = False,
) -> None:
    """A resolver's verdict on a quarantined or escalated conflict: a winner or reject all.

    In fail-closed domains (payment, refund, permission) only principals.humans may pick
    an outcome other than the conservative ones.
    """
    if (winner is None) == (not reject_all):
        raise InputError("give exactly one of --winner CLAIM_ID or --reject-all")
    with _graph() as g:
        r = g.resolve(
            conflict_id, agent=agent, winner=winner, resolver=resolver, rationale=rationale
        )
        _print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


@app.command()
def grant(
    grantee: Annotated[str, typer.Argument(help="Agent (pattern) receiving the grant.")],
    edge_type: Annotated[str, typer.Argument(help="Edge type, or * for all.")],
    agent: AgentOpt = "admin",
    grantee_task: Annotated[str, typer.Option("--grantee-task", help="Task pattern.")] = "*",
    expires_at: Annotated[str | None, typer.Option(help="Log time it lapses (ISO or ms).")] = (
        None
    ),
    as_json: JsonOpt = False,
) -> None:
    """Grant extra write scope for an edge type (admin only)."""
    with _graph() as g:
        r = g.grant(
            grantee, edge_type, agent=agent, grantee_task=grantee_task, expires_at=_when(expires_at)
        )
        _print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


@app.command()
def revoke(
    grant_id: Annotated[str, typer.Argument(help="The grant's command id.")],
    agent: AgentOpt = "admin",
    as_json: JsonOpt = False,
) -> None:
    """Revoke a grant (admin only)."""
    with _graph() as g:
        r = g.revoke(grant_id, agent=agent)
        _print_receipt(r, as_json)
        if r.kind == "rejected":
            raise typer.Exit(1)


# -- reads ------------------------------------------------------------------------------------


@app.command()
def head(as_json: JsonOpt = False) -> None:
    """The newest version (the offset of the last applied decision; -1 when empty)."""
    with _graph() as g:
        h = g.head()
        pending = g.pending() if hasattr(g, "pending") else 0
        if as_json:
            _emit({"graph": g.name, "head": h, "pending": pending})
        else:
            out.print(
                f"{g.name}: head v{h}" + (f" ({pending} pending)" if pending else ""), markup=False
            )


@app.command()
def get(
    edge_type: Annotated[str, typer.Argument(help="Edge type.")],
    subject: Annotated[str, typer.Argument(help="Subject node as type:id.")],
    obj: Annotated[
        str | None,
        typer.Argument(metavar="[OBJECT]", help="Object node; omit it to read the subject's slot."),
    ] = None,
    at: AtOpt = None,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Read an edge (present / absent / unknown) or, without OBJECT, a subject's slot."""
    with _graph() as g:
        if obj is None:
            s = g.slot(edge_type, subject, at=at, timeout=wait)
            if as_json:
                _emit(s.as_dict())
                return
            held = ", ".join(f"{t}:{i}" for t, i in s.nodes) or "nothing"
            line = f"v{s.version} {edge_type}({subject}) → {held} [{s.state}]"
            if s.conflict_id:
                line += f" conflict={s.conflict_id}"
            if s.fallback is not None:
                line += f" fallback={s.fallback}"
            out.print(line, markup=False)
            return
        e = g.edge(edge_type, subject, obj, at=at, timeout=wait)
        if as_json:
            view = e.as_dict()
            view["claim_details"] = [g.claim_info(c, at=e.version) for c in e.claims]
            _emit(view)
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


@app.command()
def neighbors(
    node: Annotated[str, typer.Argument(help="Node as type:id.")],
    edge_type: Annotated[str | None, typer.Option("--type", help="Only this edge type.")] = (None),
    incoming: Annotated[
        bool, typer.Option("--in", help="Incoming edges instead of outgoing.")
    ] = False,
    at: AtOpt = None,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """A node's neighbours at a version (present and unknown edges)."""
    direction = "in" if incoming else "out"
    with _graph() as g:
        version = g.head() if at is None else at
        ns = g.neighbors(node, edge_type=edge_type, direction=direction, at=at, timeout=wait)
        if as_json:
            _emit(
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


@app.command()
def history(
    edge_type: Annotated[str, typer.Argument(help="Edge type.")],
    subject: Annotated[str, typer.Argument(help="Subject node as type:id.")],
    obj: Annotated[str, typer.Argument(metavar="OBJECT", help="Object node as type:id.")],
    at: AtOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every decision that touched an edge, oldest first."""
    with _graph() as g:
        hs = g.history(edge_type, subject, obj, at=at)
        if as_json:
            _emit(hs)
            return
        if not hs:
            out.print("no history: no claim was ever made about this edge", markup=False)
        for h in hs:
            out.print(
                f"v{h['version']:<5} {h['kind']:<11} {h['reason']:<20} by "
                f"{h['agent']:<18} → {h['state']}"
                + (f" (conflict {h['conflict_id']})" if h["conflict_id"] else ""),
                markup=False,
            )


@app.command()
def quarantine(
    at: AtOpt = None,
    include_closed: Annotated[bool, typer.Option("--all", help="Include closed conflicts.")] = (
        False
    ),
    as_json: JsonOpt = False,
) -> None:
    """Conflicts withheld from the readable graph, with their claims."""
    with _graph() as g:
        version = g.head() if at is None else at
        cs = g.quarantine(at=at, include_closed=include_closed)
        if as_json:
            for c in cs:
                c["claim_details"] = [g.claim_info(x, at=version) for x in c["members"]]
            _emit({"version": version, "conflicts": cs})
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


@app.command("claim")
def claim_show(
    claim_id: Annotated[str, typer.Argument(help="Claim id (its command id).")],
    at: AtOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A claim's full record and status at a version: who said what, on what evidence."""
    with _graph() as g:
        info = g.claim_info(claim_id, at=at)
        if info is None:
            raise ClaimgraphError(f"no claim {claim_id!r} at that version")
        if as_json:
            _emit(info)
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
            out.print(f"{k:>17}: {info.get(k)}", markup=False)


@app.command("log")
def log_cmd(
    start: Annotated[int, typer.Option("--from", help="First version.")] = 0,
    limit: Annotated[int, typer.Option(help="How many decisions.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The decisions log: what the governor decided, version by version."""
    with _graph() as g:
        for v, d in g.decisions(start, limit):
            if as_json:
                row = dict(d)
                row["version"] = v
                _emit(row)
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


@app.command()
def verify(as_json: JsonOpt = False, start: FromOpt = None, end: ToOpt = None) -> None:
    """Re-run the governor over the commands log and compare decisions byte for byte
    (every version, or a --from/--to range folded from the decisions before it)."""
    if CTX.bootstrap:
        if start is not None or end is not None:
            raise ConfigError("verify --from/--to is for the embedded runtime")
        _verify_kafka(as_json)
        return
    from claimgraph.service.audit import verify as run_verify

    with _graph() as g, _progress("verify") as cb:
        rep = run_verify(g, cb, start=start, end=end)
    if as_json:
        _emit(rep.as_dict())
    else:
        out.print(
            f"verify ok: {rep.commands} commands → {rep.decisions} decisions, identical bytes",
            markup=False,
        )


@app.command()
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
        _audit_kafka(as_json)
        return
    from claimgraph.service.audit import audit as run_audit

    if at is not None:
        if start is not None or end is not None:
            raise ConfigError("give --at or a --from/--to range, not both")
        start = end = at
    with _graph() as g, _progress("audit") as cb:
        rep = run_audit(g, cb, samples=samples, start=start, end=end)
    if as_json:
        _emit(rep.as_dict())
    else:
        out.print(f"audit ok: {rep.rows} rows identical in v{rep.start}..v{rep.head}", markup=False)
        for v, dg in rep.digests.items():
            out.print(f"  digest at v{v}: {dg}", markup=False)


@app.command()
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
        raise InputError(f"unknown scenario {scenario!r}; expected inventory or refunds")


def _verify_kafka(as_json: bool) -> None:
    from claimgraph.cli.kafka import verify_kafka

    verify_kafka(as_json)


def _audit_kafka(as_json: bool) -> None:
    from claimgraph.cli.kafka import audit_kafka

    audit_kafka(as_json)


def _register_kafka() -> None:
    from claimgraph.cli.kafka import register

    register(app)


def _register_governance() -> None:
    from claimgraph.cli.governance import register

    register(app)


def _register_versions() -> None:
    from claimgraph.cli.versions import register

    register(app)


def _register_http() -> None:
    from claimgraph.cli.serving import register

    register(app)  # serve, runs, key


_register_kafka()
_register_governance()
_register_versions()
_register_http()


def main() -> None:
    """Entry point: run the CLI, turning our errors into one line and an exit code."""
    try:
        app()
    except SchemaError as exc:
        err.print(f"claimgraph: error: {exc}", markup=False)
        if len(exc.problems) > 1:
            err.print(exc.report(), markup=False)
        sys.exit(exc.exit_code)
    except ClaimgraphError as exc:
        err.print(f"claimgraph: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("claimgraph: interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if os.environ.get("CLAIMGRAPH_DEBUG"):
            raise
        err.print(
            f"claimgraph: internal error: {type(exc).__name__}: {exc} "
            "(set CLAIMGRAPH_DEBUG=1 for the traceback)",
            markup=False,
        )
        sys.exit(70)
