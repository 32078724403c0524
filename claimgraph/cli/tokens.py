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
    another: Annotated[
        bool,
        typer.Option(
            "--another", help="Add it beside the agent's token(s): another task scope, a rotation."
        ),
    ] = False,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires",
            help="When it stops working: a duration from now (30d, 12h) or a time (ISO 8601 "
            "or ms). Default: never.",
        ),
    ] = None,
    tokens: TokensOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Add a token for AGENT and print it — once: the file keeps only its SHA-256.

    A running `claimgraph serve` picks it up at the next request (or on SIGHUP).
    """
    from claimgraph.http.auth import token_digest
    from claimgraph.http.tokens import add_token

    if replace and another:
        raise ConfigError("give --replace (instead of its tokens) or --another (beside them)")
    path = _path(tokens)
    expires_at = _expires_at(expires)
    token = add_token(
        path,
        agent,
        tasks=task or ["*"],
        roles=role or [],
        replace=replace,
        another=another,
        expires_at=expires_at,
    )
    tid = "t-" + token_digest(token)[:12]
    if as_json:
        emit({"id": tid, "agent": agent, "tasks": task or ["*"],
              "roles": sorted(set(role or [])), "expires_at": expires_at, "token": token,
              "file": str(path)})  # fmt: skip
        return
    roles = ", ".join(sorted(set(role or []))) or "no roles"
    until = f"; expires {_when(expires_at)}" if expires_at is not None else ""
    scope = f"tasks {', '.join(task or ['*'])}; {roles}{until}"
    say(f"added token {tid} for {agent} ({scope}) to {path}")
    say("it is shown only now (the file keeps its SHA-256):")
    say(token)


def _expires_at(text: str | None) -> int | None:
    """``--expires``: a duration from now (30d) or a time (ISO 8601, ms) → ms."""
    if text is None:
        return None
    from claimgraph.cli.common import when
    from claimgraph.core.schema import duration_ms
    from claimgraph.service.writes import now_millis

    ms = duration_ms(text)
    if ms is not None:
        return now_millis() + ms
    try:
        return when(text)
    except ClaimgraphError:
        raise ConfigError(
            f"--expires {text[:40]!r}: expected a duration (30d, 12h) or a time (ISO 8601 or ms)"
        ) from None


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@token_app.command("list")
def token_list(
    tokens: TokensOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The tokens in the token file: id, agent, tasks, roles, expiry and last use (recorded
    by a running serve at most 30 s late) — never the tokens themselves."""
    from claimgraph.http.auth import TokenFile
    from claimgraph.http.tokens import read_last_used

    path = _path(tokens)
    rows = TokenFile.load(path).tokens()
    used = read_last_used(path)
    for r in rows:
        r["last_used"] = used.get(r["id"])
    if as_json:
        emit(rows)
        return
    for r in rows:
        expires = _when(r["expires_at"]) + (" (expired)" if r["expired"] else "")
        say(
            f"{r['id']}  {r['agent']}  tasks {', '.join(r['tasks'])}  "
            f"roles {', '.join(r['roles']) or '-'}  expires {expires}  "
            f"last used {_when(r['last_used']) if r['last_used'] else 'never'}"
        )


@token_app.command("revoke")
def token_revoke(
    ids: Annotated[
        list[str] | None, typer.Argument(help="Token ids (token list shows them).")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Every token of this agent.")
    ] = None,
    tokens: TokensOpt = None,
) -> None:
    """Remove tokens from the token file: a running serve refuses them at its next request."""
    from claimgraph.http.tokens import revoke_tokens

    if not ids and agent is None:
        raise ConfigError("name the token ids to revoke, or --agent AGENT for all of its tokens")
    path = _path(tokens)
    gone = revoke_tokens(path, ids or [], agent)
    say(f"revoked {len(gone)} token(s) from {path}: {', '.join(gone)}")


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
