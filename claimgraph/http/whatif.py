"""A dry-run publish over HTTP: ``POST /v1/commands/publish_schema`` with ``"dry_run": true``.

The caller is checked exactly as for a real publish (the same token, agent, task and admin
role checks), but nothing is recorded, refused or not: a dry run has no version. The what-if
(:mod:`claimgraph.service.whatif`) runs in a child process over a read-only view of the
embedded graph's logs (:func:`claimgraph.service.whatif_run.what_if_in_process`), bounded
by the request's ``what_if.seconds``; the answer is the report, or — when publishing the
schema would be refused, now or at the range's start — the refusal as a problem carrying
the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from claimgraph.core.model import Command
from claimgraph.errors import ConfigError, InputError
from claimgraph.http.bodies import SchemaIn, WhatIfIn
from claimgraph.http.problems import problem, status_for
from claimgraph.service.port import GraphAPI
from claimgraph.service.whatif import Bounds
from claimgraph.service.whatif_run import what_if_in_process

__all__ = ["check_options", "dry_run"]


def dry_run(graph: GraphAPI, command: Command, body: SchemaIn) -> Any:
    """Answer a dry-run publish of ``body`` as ``command`` (the publish, or its refusal)."""
    c = cast(dict[str, Any], command)
    if c["type"] == "refused":  # as the real publish would be refused, but not recorded
        return problem(c["reason"], c["detail"], dry_run=True)
    path = getattr(graph, "path", None)
    if not isinstance(path, Path) or not (path / "log").is_dir():
        raise ConfigError(
            "a dry-run publish reads an embedded graph's logs; this server's graph has none "
            "(the Kafka runtime has no what-if yet)"
        )
    opts = body.what_if or WhatIfIn.model_validate({})
    bounds = Bounds(
        start=opts.from_version,
        end=opts.to_version,
        limit=opts.limit,
        seconds=opts.seconds,
        first=opts.first,
    )
    report = what_if_in_process(
        path, body.document, source=body.source, agent=c["agent"], bounds=bounds
    )
    p = report["proposal"] if report["stopped"] == "refused" else report["now"]
    if p is not None and p["kind"] == "rejected":  # the real publish would be refused so
        return problem(
            p["reason"], p["detail"], status=status_for(p["reason"]), dry_run=True, what_if=report
        )
    return {"dry_run": True, "what_if": report}


def check_options(body: SchemaIn) -> None:
    """``what_if`` options mean nothing without ``dry_run``: refuse them (nothing recorded)."""
    if body.what_if is not None and not body.dry_run:
        raise InputError('what_if options are for a dry run: send "dry_run": true with them')
