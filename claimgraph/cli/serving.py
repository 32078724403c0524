"""CLI commands for what agents and people touch: ``serve``, ``runs``, ``key``."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.catalogue import add_write
from claimgraph.cli.common import CTX, HelpGroup, emit, graph_session, say
from claimgraph.cli.tokens import serve_tokens, watch_schema
from claimgraph.errors import ConfigError, IntegrityError
from claimgraph.http.limits import HTTP_LIMITS, HttpLimits
from claimgraph.logconf import events

__all__ = ["key_app", "register", "runs_app", "serve"]

runs_app = typer.Typer(
    cls=HelpGroup,
    help="Runs: the version each run pinned, what it read and wrote; replay to prove its inputs.",
    no_args_is_help=True,
)
key_app = typer.Typer(
    cls=HelpGroup,
    help="Ed25519 signing keys for producers that write to the commands log directly.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
_log = events("serve")


# -- runs -------------------------------------------------------------------------------------


@runs_app.command("list")
def runs_list(as_json: JsonOpt = False) -> None:
    """Every run: agent, task, pinned version, snapshot, reads/writes, and whether it ended."""
    with graph_session() as g:
        runs = g.runs()
    if as_json:
        emit([r.as_dict() for r in runs])
        return
    if not runs:
        say("no runs yet")
    for r in runs:
        state = f"ended {r.status}" if not r.live else "LIVE (pins its version)"
        snap = f" snapshot {r.snapshot_id}" if r.snapshot_id else ""
        say(
            f"{r.run_id}  {r.agent}/{r.task or '-'}  at v{r.pinned_version}{snap}  "
            f"{r.reads} reads, {r.writes} writes, {r.tools} tools  {state}"
        )


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run's id (claimgraph runs list).")],
    as_json: JsonOpt = False,
) -> None:
    """A run's trace: the pinned version, each read (query, digest), write and tool call."""
    import json

    from claimgraph.errors import RunNotFound

    with graph_session() as g:
        events = g.run_events(run_id)
    if not events:
        raise RunNotFound(run_id)
    if as_json:
        emit(events)
        return
    first = events[0]
    say(
        f"run {run_id}: {first['agent']}/{first['task'] or '-'} pinned v{first['pinned_version']}"
        + (f" (snapshot {first['snapshot_id']})" if first["snapshot_id"] else "")
    )
    for e in events:
        p = json.loads(e["payload"])
        if e["kind"] == "read":
            q = p["query"]
            args = ", ".join(f"{k}={v}" for k, v in q["args"].items() if v is not None)
            line = f"read  {q['op']}({args})  digest {p['digest'][:16]}"
        elif e["kind"] == "write":
            line = f"write {p['command_type']} {p['command_id']} → v{p['version']} {p['kind']} "
            line += p["reason"]
        elif e["kind"] == "tool":
            line = f"tool  {p['name']}  in={json.dumps(p['input'])}  out={json.dumps(p['output'])}"
        elif e["kind"] == "end":
            line = f"end   {p['status']}"
        else:
            line = "start"
        say(f"  {e['seq']:>4} {line}")


@runs_app.command("replay")
def runs_replay(
    run_id: Annotated[str, typer.Argument(help="The run's id (claimgraph runs list).")],
    as_json: JsonOpt = False,
) -> None:
    """Re-execute the run's reads at its pinned version; exit 7 at the first difference."""
    with graph_session() as g:
        rep = g.replay_run(run_id)
    if as_json:
        emit(rep.as_dict())
    if not rep.identical:
        diff = rep.first_difference or {}
        raise IntegrityError(
            f"run {run_id} replayed differently at event {diff.get('seq')}: "
            f"{diff.get('query')} recorded {diff.get('recorded', '')[:16]}, "
            f"now {str(diff.get('replayed', ''))[:40]}"
        )
    if not as_json:
        say(f"replay ok: {rep.reads} reads at v{rep.pinned_version} gave identical results")


# -- keys ---------------------------------------------------------------------------------------


@key_app.command("generate")
def key_generate(
    path: Annotated[Path, typer.Argument(help="Where to write the private key (PEM, mode 600).")],
    key_id: Annotated[
        str | None, typer.Option(help="The key's id (default: the file name's stem).")
    ] = None,
) -> None:
    """Create an Ed25519 key pair; print the key id and the public key (hex) to register."""
    from claimgraph.service.signers import Signer

    if path.exists():
        raise ConfigError(f"{path} exists; refusing to overwrite a key")
    s = Signer.generate(key_id or path.stem)
    s.save(path)
    say(f"key {s.key_id}: private key in {path}")
    say(f"public key: {s.public_bytes.hex()}")
    say(
        f"register it: claimgraph key register {s.key_id} {s.public_bytes.hex()} "
        "--for AGENT --agent ADMIN"
    )


def _signer(path: Path | None) -> Any:
    from claimgraph.service.signers import Signer

    return Signer.load(path) if path is not None else None


add_write(
    key_app,
    "register",
    "register_key",
    "Register a public key (admin); from then on the graph requires signed commands.",
    path="key register",
)
add_write(key_app, "revoke", "revoke_key", "Revoke a signing key (admin).", path="key revoke")


# -- serve --------------------------------------------------------------------------------------


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    tokens: Annotated[
        Path | None,
        typer.Option(
            help="Token file (bearer token → principal), re-read when it changes or on "
            "SIGHUP. Default: DATA/tokens.json, created with a token per principal the "
            "schema names if missing."
        ),
    ] = None,
    tick: Annotated[
        float,
        typer.Option(
            help="Seconds between the ticker's looks at the next quarantine deadline; it writes "
            "a tick only when one is due (0: no ticker)."
        ),
    ] = 5.0,
    resolvers: Annotated[
        bool,
        typer.Option(
            help="Run the schema's resolver chains on open conflicts as decisions land (when "
            "the schema defines chains)."
        ),
    ] = True,
    arbiter: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=COMMAND or NAME=URL: an arbiter this server may run for the schema's "
            "arbiter NAME (repeatable; also DATA/arbiters.json). Others are never run."
        ),
    ] = None,
    signing_key: Annotated[
        Path | None,
        typer.Option(
            help="The ingress's private key, for graphs that require signatures (register it "
            "with --for '*')."
        ),
    ] = None,
    max_body: Annotated[
        int, typer.Option(min=1, help="Bytes of one request body (413 past it, unread).")
    ] = HTTP_LIMITS.max_body,
    max_depth: Annotated[
        int, typer.Option(min=1, help="JSON nesting of a body or a trace payload.")
    ] = HTTP_LIMITS.max_depth,
    max_requests: Annotated[
        int, typer.Option(min=1, help="Requests in flight per principal (429 past it).")
    ] = HTTP_LIMITS.max_requests,
    max_waits: Annotated[
        int, typer.Option(min=1, help="Reads waiting for a future version, per principal.")
    ] = HTTP_LIMITS.max_waits,
    max_waits_total: Annotated[
        int, typer.Option(min=1, help="Reads waiting for a future version, in all.")
    ] = HTTP_LIMITS.max_waits_total,
    max_wait: Annotated[
        float, typer.Option(min=0, max=30, help="Seconds one read may wait for its version.")
    ] = HTTP_LIMITS.max_wait,
    max_run_events: Annotated[
        int, typer.Option(min=1, max=10_000, help="Trace events per request.")
    ] = HTTP_LIMITS.max_run_events,
    max_run_trace: Annotated[
        int, typer.Option(min=1, help="Trace events per run (counted per server process).")
    ] = HTTP_LIMITS.max_run_trace,
    max_run_bytes: Annotated[
        int, typer.Option(min=1, help="Bytes of trace payloads per run (idem).")
    ] = HTTP_LIMITS.max_run_bytes,
    max_pins: Annotated[
        int, typer.Option(min=1, help="Live retention pins per principal (429 past it).")
    ] = HTTP_LIMITS.max_pins,
    max_batch: Annotated[
        int, typer.Option(min=1, max=10_000, help="Commands per POST /v1/commands.")
    ] = HTTP_LIMITS.max_batch,
    ready_lag: Annotated[
        float,
        typer.Option(
            min=0, help="/readyz answers 503 while the projection is more seconds behind the log."
        ),
    ] = 1.0,
    request_log: Annotated[
        bool, typer.Option(help="One JSON line per request on stderr (docs/how-to/observe.md).")
    ] = True,
) -> None:
    """Serve the graph over HTTP: the API, the review page (/review), a ticker and resolvers.

    Embedded by default (--data); with --bootstrap, the Kafka runtime: writes go to the
    commands topic and reads come from the projector's directory given as --data.
    The --max-* options bound what one request and one principal may cost
    (docs/reference/limits.md).
    """
    import uvicorn

    from claimgraph.http.app import create_app
    from claimgraph.http.observe import request_logger

    signal.signal(signal.SIGTERM, _terminate)  # a stop like Ctrl-C's: the cleanup below runs
    ctx = CTX
    signer = _signer(signing_key)
    if ctx.bootstrap:
        from claimgraph.service.kafka_graph import KafkaGraph

        graph: Any = KafkaGraph(ctx.kafka(), ctx.graph, ctx.data)
        runtime = f"Kafka {ctx.bootstrap}, projection {ctx.data}"
    else:
        from claimgraph.service.graph import open_graph

        graph = open_graph(ctx.data)
        runtime = f"embedded, {ctx.data}"
    token_file = serve_tokens(graph, tokens)  # created on first start for the schema's principals
    limits = HttpLimits(
        max_body=max_body,
        max_depth=max_depth,
        max_requests=max_requests,
        max_waits=max_waits,
        max_waits_total=max_waits_total,
        max_wait=max_wait,
        max_run_events=max_run_events,
        max_run_trace=max_run_trace,
        max_run_bytes=max_run_bytes,
        max_pins=max_pins,
        max_batch=max_batch,
    )
    app = create_app(
        graph,
        token_file,
        signer=signer,
        limits=limits,
        ready_lag=ready_lag,
        request_log=request_logger() if request_log else None,
    )
    _mount_mcp(app, host)
    stop = threading.Event()
    watch_schema(graph, token_file, stop)  # a schema published later: say which tokens to add
    # SIGHUP re-reads the tokens; on a thread of its own: the handler may interrupt a reload
    # that holds the file's lock on this (the main) thread
    signal.signal(
        signal.SIGHUP,
        lambda *_: threading.Thread(target=token_file.reload, name="claimgraph-sighup").start(),
    )
    from claimgraph.cli.duties import Duties

    graph.signer = signer
    duties = Duties(
        graph,
        ctx.data,
        tick=tick,
        resolvers=resolvers,
        arbiters=arbiter or [],
        kafka=ctx.kafka() if ctx.bootstrap else None,
    )
    url = f"http://{host}:{port}"
    say(f"claimgraph: graph {graph.name!r} ({runtime})")
    say(f"  API          {url}/v1   (OpenAPI: {url}/docs)")
    say(f"  review page  {url}/review")
    say(f"  MCP          {url}/mcp   (streamable HTTP, same tokens)")
    say(f"  probes       {url}/healthz  {url}/readyz  {url}/metrics")
    say(f"  tokens       {token_file.path}  (Authorization: Bearer TOKEN; reloaded on change)")
    say(f"  duties       {duties.describe()}")
    try:
        from claimgraph.service.local_writer import listening

        # CLI writes from other processes, while serve holds the data: through the same
        # service layer as the API's and /mcp's
        with listening(graph, app.state.access):
            # uvicorn's records go to the process's logging (no config, no levels of its own);
            # no access lines: claimgraph.http logs each request
            uvicorn.run(
                app, host=host, port=port, log_config=None, log_level=None, access_log=False
            )
    finally:
        stop.set()
        token_file.flush_used()  # the tokens' last use, for token list
        app.state.access.close()  # the runs it holds end
        duties.close()
        graph.close()
        if _TERMINATED.is_set():
            _log.info("serve.stopped", signal="SIGTERM")


_TERMINATED = threading.Event()


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM: unwind as Ctrl-C does (every ``finally`` runs), then exit 0.

    uvicorn handles SIGTERM itself while it serves (it drains the connections and runs the
    app's shutdown), then restores this handler and raises the signal again: here, so the
    socket, the announcement and the graph are closed, not left behind by the default action
    (exit 143 on the spot)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
    _TERMINATED.set()
    raise SystemExit(0)


def _mount_mcp(app: Any, host: str) -> None:
    """MCP's streamable HTTP transport at /mcp, through the app's service layer (the same
    token file, limits and runs)."""
    try:
        from claimgraph.mcp.transports import mount
    except ImportError:  # the mcp extra is not installed: the API serves without it
        return
    mount(app, host=host)


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``runs`` and ``key`` to the CLI."""
    app.command("serve", rich_help_panel="Serve and agents")(serve)
    app.add_typer(runs_app, name="runs", rich_help_panel="Serve and agents")
    app.add_typer(key_app, name="key", rich_help_panel="Keys and tokens")
