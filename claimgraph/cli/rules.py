"""CLI commands for the governor's rules revisions and the decisions hash chain."""

from __future__ import annotations

from typing import Annotated

import typer

from claimgraph.cli.catalogue import add_write
from claimgraph.cli.common import (
    CTX,
    HelpGroup,
    JsonOpt,
    emit,
    graph_session,
    say,
)
from claimgraph.core.governor.revisions import CHANGES, CURRENT, LEGACY
from claimgraph.errors import ConfigError

__all__ = ["register", "rules_app"]

rules_app = typer.Typer(
    cls=HelpGroup,
    help="Governor rules revisions: which one decides this graph, and upgrading it.",
    no_args_is_help=True,
)


@rules_app.command("show")
def rules_show(as_json: JsonOpt = False) -> None:
    """The rules revision deciding this graph, and what each revision changed."""
    with graph_session() as g:
        head = g.head()
        last = g.decisions(head, 1) if head >= 0 else []
        now = last[0][1]["rules"] if last else CURRENT
    if as_json:
        emit({"rules": now, "current": CURRENT, "changes": CHANGES})
        return
    say(f"this graph decides under rules revision {now} (the newest is {CURRENT})")
    for rev in range(LEGACY, CURRENT + 1):
        for line in CHANGES[rev]:
            say(f"  {rev}: {line}")
    if now < CURRENT:
        say(f"upgrade with: claimgraph rules upgrade --to {CURRENT} --agent ADMIN")


add_write(
    rules_app,
    "upgrade",
    "upgrade_rules",
    "Move the graph to a newer rules revision from now on (an admin, through the log).",
    path="rules upgrade",
    defaults={"to": CURRENT},
)


def digest(
    at: Annotated[
        int | None, typer.Option("--at", help="The version to digest (default: head).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The decisions hash chain's digest at a version: keep it; `verify --digest` checks it."""
    if CTX.bootstrap:
        raise ConfigError("digest reads the embedded logs; on Kafka, verify checks the chain")
    from claimgraph.service.chain import check_chain

    with graph_session() as g:
        rep = check_chain(g, upto=at)
    if as_json:
        emit(rep.as_dict())
    else:
        say(f"{rep.digest}  version {rep.version}")


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules", rich_help_panel="Govern")
    app.command("digest", rich_help_panel="Versions and retention")(digest)
