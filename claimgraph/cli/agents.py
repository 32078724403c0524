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

from claimgraph.cli.common import CTX, app, out
from claimgraph.errors import ConfigError

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
) -> None:
    """Serve the graph's tools to an agent host over stdio (MCP): one session, inside a run."""
    from claimgraph.mcp.session import AgentSession, Identity
    from claimgraph.mcp.transports import serve_stdio

    graph: Any
    if url is not None:
        if token is None:
            raise ConfigError("--url needs --token: the server knows who a token is")
        from claimgraph.sdk.http import connect

        graph = connect(url, token)
        who = graph.whoami()
        ident = Identity(
            who["agent"], tuple(who["tasks"]), frozenset(who["roles"]), False, "server"
        )
    elif token is not None:
        from claimgraph.http.auth import TokenFile

        p = TokenFile.load(tokens or CTX.data / "tokens.json").principal(token)
        if p is None:
            raise ConfigError("the token is not in the token file")
        graph = _open()
        ident = Identity(p.agent, p.tasks, p.roles, True, "token")
    elif agent is not None:
        if CTX.bootstrap:
            raise ConfigError("--agent is the local owner's mode (embedded only); use --token")
        graph = _open()
        ident = Identity(agent, ("*",), frozenset(), False, "local-owner")
    else:
        raise ConfigError("who is the agent? give --token (or --url and --token), or --agent")
    session = AgentSession(graph, ident, task=ident.default_task if task is None else task,
                           snapshot_id=snapshot)  # fmt: skip
    from claimgraph.service.local_writer import listening

    try:
        with listening(graph):  # as the directory's writer, it takes others' writes meanwhile
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
) -> None:
    """Print the graph's tool definitions for a model host (from the MCP tools' signatures)."""
    from claimgraph.mcp.toolspec import tool_definitions

    out.print(json.dumps(tool_definitions(fmt), indent=2, ensure_ascii=False), markup=False)


def register(root: typer.Typer = app) -> None:
    """Add ``mcp`` and ``tools`` to the CLI."""
    root.command("mcp", rich_help_panel="Serve and agents")(mcp)
    root.command("tools", rich_help_panel="Serve and agents")(tools)
