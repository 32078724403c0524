"""CLI for bearer tokens: ``token add`` / ``token list``, and the token file ``serve`` uses.

``serve`` creates the token file on first start with a token for every concrete principal
the published schema names (admins, resolvers, humans), prints how to add tokens for the
schema's patterns (``human:*``) and for principals that have none, and watches the schema:
when a new revision is published while it runs, it prints the same advice for that one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.common import CTX, HelpGroup, emit, say
from claimgraph.errors import ClaimgraphError, ConfigError

__all__ = ["register", "serve_tokens", "token_app", "watch_schema"]

token_app = typer.Typer(
    cls=HelpGroup,
    help="Bearer tokens for the HTTP API, the review page and MCP (the token file).",
    no_args_is_help=True,
)

TokensOpt = Annotated[
    Path | None, typer.Option("--tokens", help="The token file (default: DATA/tokens.json).")
]


def _path(tokens: Path | None) -> Path:
    return tokens if tokens is not None else CTX.data / "tokens.json"


@token_app.command("add")
def token_add(
    agent: Annotated[str, typer.Argument(help="The agent the token speaks for (one name).")],
    task: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", help="A task pattern it may act in (repeat; default '*')."),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role", "-r", help="admin or resolver (repeat); none: a plain agent (writer)."
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Revoke the agent's existing token(s).")
    ] = False,
    tokens: TokensOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Add a token for AGENT and print it — once: the file keeps only its SHA-256.

    A running `claimgraph serve` picks it up at the next request (or on SIGHUP).
    """
    from claimgraph.http.tokens import add_token

    path = _path(tokens)
    token = add_token(path, agent, tasks=task or ["*"], roles=role or [], replace=replace)
    if as_json:
        emit({"agent": agent, "tasks": task or ["*"], "roles": sorted(set(role or [])),
              "token": token, "file": str(path)})  # fmt: skip
        return
    roles = ", ".join(sorted(set(role or []))) or "no roles"
    say(f"added a token for {agent} (tasks {', '.join(task or ['*'])}; {roles}) to {path}")
    say("it is shown only now (the file keeps its SHA-256):")
    say(token)


@token_app.command("list")
def token_list(
    tokens: TokensOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The principals in the token file (never the tokens)."""
    from claimgraph.http.auth import TokenFile

    tf = TokenFile.load(_path(tokens))
    ps = [p.as_dict() for p in tf.principals()]
    if as_json:
        emit(ps)
        return
    for p in ps:
        say(f"{p['agent']}  tasks {', '.join(p['tasks'])}  roles {', '.join(p['roles']) or '-'}")


# -- what serve uses ------------------------------------------------------------------------


def _schema(graph: Any) -> Any:
    from claimgraph.core.schema import parse_schema

    row = graph.schema_info()
    return None if row is None else parse_schema(row["document"], row["source"] or "<schema>")


def _add_cmd(path: Path) -> str:
    cmd = f"claimgraph --data {CTX.data} token add"
    return cmd if path == CTX.data / "tokens.json" else f"{cmd} --tokens {path}"


def hints(schema: Any, token_file: Any, path: Path) -> list[str]:
    """What to add to the token file so the schema's principals can act, and what is wrong."""
    from claimgraph.http.tokens import role_mismatches, schema_principals

    add = _add_cmd(path)
    if schema is None:
        return [
            "  no schema is published yet: the first must name its publisher among "
            "principals.admins; then add a token per principal it names: "
            f"{add} AGENT --role admin|resolver"
        ]
    have = {p.agent for p in token_file.principals()}
    named, patterns = schema_principals(schema)
    out = []
    for p in named:
        if p["agent"] not in have:
            roles = " ".join(f"--role {r}" for r in p["roles"])
            out.append(
                f"  the schema names {p['agent']} ({', '.join(p['roles'])}) but no token "
                f"speaks for it: {add} {p['agent']} {roles}"
            )
    for pat in patterns:
        kind, _, text = pat.partition(" ")
        example = text.strip("'").replace("*", "NAME").replace("?", "X")
        role = "admin" if kind == "principals.admins" else "resolver"
        out.append(
            f"  {pat} is a pattern: add a token per person, e.g. {add} {example} --role {role}"
        )
    out.extend(f"  {line}" for line in role_mismatches(schema, token_file.principals()))
    return out


def serve_tokens(graph: Any, tokens: Path | None) -> Any:
    """The token file ``serve`` uses (a :class:`WatchedTokenFile`), created on first start."""
    from claimgraph.http.auth import generate_token_file
    from claimgraph.http.tokens import WatchedTokenFile, role_mismatches, schema_principals

    path = _path(tokens)
    schema = _schema(graph)
    if not path.exists():
        if tokens is not None:
            raise ConfigError(f"token file {path} does not exist")
        named = (
            schema_principals(schema)[0]
            if schema is not None
            else [{"agent": "admin", "roles": ["admin"]}]
        )
        generate_token_file(path, named)
        who = ", ".join(f"{p['agent']} ({', '.join(p['roles'])})" for p in named) or "nobody"
        say(f"created {path} with tokens for: {who}")

    def check(tf: Any) -> None:  # a token just added may hold a role the schema denies
        try:
            schema = _schema(graph)
        except ClaimgraphError:
            return
        if schema is not None:
            for line in role_mismatches(schema, tf.principals()):
                say(f"  {line}")

    token_file = WatchedTokenFile(
        path, report=lambda line: say(f"claimgraph: {line}"), on_reload=check
    )
    for line in hints(schema, token_file, path):
        say(line)
    return token_file


def watch_schema(graph: Any, token_file: Any, stop: threading.Event, every: float = 1.0) -> None:
    """Start a thread that prints :func:`hints` whenever a new schema revision is in force."""

    def revision() -> int | None:
        row = graph.schema_info()
        return None if row is None else int(row["revision"])

    seen = revision()

    def loop() -> None:
        nonlocal seen
        while not stop.wait(every):
            try:
                rev = revision()
                if rev != seen:
                    seen = rev
                    say(f"claimgraph: schema revision {rev} is in force")
                    for line in hints(_schema(graph), token_file, token_file.path):
                        say(line)
            except ClaimgraphError:  # the store or broker is away: look again next time
                continue

    threading.Thread(target=loop, name="claimgraph-schema-watch", daemon=True).start()


def register(app: typer.Typer) -> None:
    """Add ``token`` to the CLI."""
    app.add_typer(token_app, name="token", rich_help_panel="Keys and tokens")
