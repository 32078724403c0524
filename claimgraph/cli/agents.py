"""``claimgraph mcp`` (the MCP server over stdio) and ``claimgraph tools`` (tool definitions).

Identity for ``mcp`` comes from how it is started, never from a tool argument:

* ``--url URL --token TOKEN`` — a served graph: the server knows the token's principal,
  enforces it and records refusals;
* ``--token TOKEN`` — the graph in ``--data`` (embedded) or on Kafka (``--bootstrap``): the
  token is looked up in the token file (``--tokens``, default ``DATA/tokens.json``);
* ``--agent NAME`` — the embedded graph in ``--data``, as the **trusted local owner**: whoever
  can open the data directory owns it, so the name is taken as given (it proves nothing about
  a person). Not offered for Kafka or served graphs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.common import CTX, app, err, out
from claimgraph.errors import ConfigError
from claimgraph.service.limits import DEFAULT_LIMITS, Limits

__all__ = ["register"]


def mcp(
    agent: Annotated[
        str | None,
        typer.Option(help="Act as this agent: trusted local owner of an embedded --data."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="CLAIMGRAPH_TOKEN", help="Bearer token: the identity (preferred)."),
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="A served graph's URL (claimgraph serve).")
    ] = None,
    tokens: Annotated[
        Path | None, typer.Option(help="Token file for --token (default: DATA/tokens.json).")
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="The task runs act in (default: the token's one task).")
    ] = None,
    snapshot: Annotated[
        str | None, typer.Option(help="Pin the first run at this shared snapshot id.")
    ] = None,
    max_requests: Annotated[
        int, typer.Option(min=1, help="Tool calls in flight at once (the service's limit).")
    ] = DEFAULT_LIMITS.max_requests,
    max_batch: Annotated[
        int, typer.Option(min=1, help="Claims or edges in one tool call.")
    ] = DEFAULT_LIMITS.max_batch,
    max_pins: Annotated[
        int, typer.Option(min=1, help="Live runs (retention pins) of the identity.")
    ] = DEFAULT_LIMITS.max_pins,
    max_run_trace: Annotated[
        int, typer.Option(min=1, help="Trace events per run.")
    ] = DEFAULT_LIMITS.max_run_trace,
    max_run_bytes: Annotated[
        int, typer.Option(min=1, help="Bytes of trace payloads per run.")
    ] = DEFAULT_LIMITS.max_run_bytes,
) -> None:
    """Serve the graph's tools to an agent host over stdio (MCP): one session.

    With --task or --snapshot it serves one run, started on the first call; without, the
    agent reads at head until it calls start_run. The checks and limits are the service
    layer's, as over HTTP (over --url, the server's)."""
    from claimgraph.mcp.session import AgentSession
    from claimgraph.mcp.transports import serve_stdio
    from claimgraph.service.access import Access, Principal

    graph: Any
    if url is not None:
        if token is None:
            raise ConfigError("--url needs --token: the server knows who a token is")
        from claimgraph.sdk.http import connect

        graph = connect(url, token)
        who = graph.whoami()
        ident = Principal(who["agent"], tuple(who["tasks"]), frozenset(who["roles"]), "server")
    elif token is not None:
        from claimgraph.http.auth import TokenFile

        p = TokenFile.load(tokens or CTX.data / "tokens.json").principal(token)
        if p is None:
            raise ConfigError("the token is not in the token file")
        graph = _open()
        ident = p
    elif agent is not None:
        if CTX.bootstrap:
            raise ConfigError("--agent is the local owner's mode (embedded only); use --token")
        graph = _open()
        ident = Principal(agent, ("*",), frozenset(), "local-owner")
    else:
        raise ConfigError("who is the agent? give --token (or --url and --token), or --agent")
    limits = Limits(
        max_requests=max_requests,
        max_batch=max_batch,
        max_pins=max_pins,
        max_run_trace=max_run_trace,
        max_run_bytes=max_run_bytes,
    )
    access = Access(graph, limits=limits)
    session = AgentSession(
        access.of(ident),
        task=task,
        snapshot_id=snapshot,
        one_run=task is not None or snapshot is not None,  # a server started for one run
        counts_requests=True,
    )
    from claimgraph.service.local_writer import listening

    try:
        with listening(graph, access):  # as the writer, it takes others' writes meanwhile
            serve_stdio(session)
    finally:
        graph.close()


def _open() -> Any:
    if CTX.bootstrap:
        from claimgraph.service.kafka_graph import KafkaGraph

        return KafkaGraph(CTX.kafka(), CTX.graph, CTX.data)
    from claimgraph.service.attached import open_local

    return open_local(CTX.data)  # attached to serve's writer when serve holds the directory


def tools(
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="openai | anthropic | json-schema")
    ] = "json-schema",
    for_agent: Annotated[
        str | None,
        typer.Option(
            "--for",
            help="Only the tools this agent's roles allow, from its tokens in the token file.",
        ),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            help="Only the tools an agent with this role is offered (repeatable; none: an "
            "agent with no role)."
        ),
    ] = None,
    tokens: Annotated[
        Path | None, typer.Option(help="Token file for --for (default: DATA/tokens.json).")
    ] = None,
    typed: Annotated[
        bool,
        typer.Option(
            "--typed",
            help="Type them by the schema in force in the graph the global options name "
            "(--data, --url or --bootstrap): edge types as an enum, node types as a pattern.",
        ),
    ] = False,
) -> None:
    """Print the graph's tool definitions for a model host (from the MCP tools' signatures).

    With --for or --role, only the tools that principal is offered over MCP (a tool whose
    command needs a role it lacks is left out); their count and size go to stderr. With
    --typed, as a session of the graph lists them: typed by its schema."""
    from claimgraph.mcp.toolspec import tool_definitions
    from claimgraph.service.principals import ROLES, Principal

    who: Principal | None = None
    if for_agent is not None and role:
        raise ConfigError("give --for (an agent of the token file) or --role, not both")
    if role:
        unknown = sorted(set(role) - {*ROLES, "none"})
        if unknown:
            raise ConfigError(
                f"unknown role {unknown[0]!r}: the roles are {', '.join(ROLES)} (or none)"
            )
        who = Principal("tools", roles=frozenset(role) - {"none"})
    elif for_agent is not None:
        from claimgraph.http.auth import TokenFile

        found = TokenFile.load(tokens or CTX.data / "tokens.json").of_agent(for_agent)
        if not found:
            raise ConfigError(f"no token of {for_agent!r} in the token file")
        if len({p.roles for p in found}) > 1:
            raise ConfigError(f"{for_agent!r} holds tokens with different roles: use --role")
        who = found[0]
    schema = None
    if typed:
        from claimgraph.cli.common import graph_session
        from claimgraph.core.schema import parse_schema

        with graph_session() as g:
            row = g.schema_info()
        if row is None:
            raise ConfigError("--typed: the graph has no schema yet (claimgraph schema apply)")
        schema = parse_schema(row["document"], row.get("source") or "<schema>")
    defs = tool_definitions(fmt, who, schema)
    text = json.dumps(defs, indent=2, ensure_ascii=False)
    out.print(text, markup=False)
    if who is not None:
        size = len(json.dumps(defs, separators=(",", ":"), ensure_ascii=False).encode())
        roles = ", ".join(sorted(who.roles)) or "no role"
        err.print(f"{len(defs)} tools for {who.agent} ({roles}): {size:,} bytes compact")


def register(root: typer.Typer = app) -> None:
    """Add ``mcp`` and ``tools`` to the CLI."""
    root.command("mcp", rich_help_panel="Serve and agents")(mcp)
    root.command("tools", rich_help_panel="Serve and agents")(tools)
