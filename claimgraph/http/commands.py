"""Writes over HTTP: one route per client command of the catalogue, as the token's principal.

``POST /v1/commands/<type>`` for every client command (:mod:`claimgraph.core.commands`); the
body is the command's fields (:data:`claimgraph.http.bodies.BODIES`). Identity comes from the
bearer token only: a request without a valid one is refused with 401 before anything else,
and nothing is recorded. The checks are the service layer's
(:meth:`claimgraph.service.access.Scoped.command`, which MCP and the writer socket call too):
a write whose declared ``agent`` is not the token's principal, whose task the principal may
not act in, or which needs a role the principal lacks is refused with 403 *and recorded* (a
``refused`` command the governor rejects with the same reason, so the refusal has a version
and nothing else changes). A command type only the system writes (``tick``, ``signed``,
``refused``, ``invalid_input``) is refused the same way, as ``system_only``; an unknown one
is a 404 that lists the command types.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from claimgraph.core.commands import CLIENT_COMMANDS, COMMANDS, CommandSpec, Sender
from claimgraph.errors import InputError, LimitError
from claimgraph.http.answers import PublishAnswer, ReceiptAnswer, described
from claimgraph.http.bodies import BODIES, PROBLEM_RESPONSES, BatchIn, BatchOut, In, SchemaIn
from claimgraph.http.context import Context, clean, decision_json, receipt_json
from claimgraph.http.problems import problem, status_for
from claimgraph.http.whatif import check_options, dry_run

__all__ = ["router"]


def router(ctx: Context) -> APIRouter:
    """The command routes over ``ctx.graph``, through its service layer (``ctx.access``)."""

    def authenticated(request: Request) -> None:
        """401 before the body is validated or any item looked at (a dependency runs first)."""
        ctx.principal(request)

    r = APIRouter(
        tags=["commands"], responses=PROBLEM_RESPONSES, dependencies=[Depends(authenticated)]
    )

    def write(request: Request, spec: CommandSpec, body: In) -> Any:
        scoped = ctx.scoped(request)  # 401 before anything: nothing recorded
        if isinstance(body, SchemaIn):
            check_options(body)
        command = scoped.command(
            spec.type,
            body.fields(),
            declared=body.agent,
            task=body.task,
            command_id=body.command_id,
        )
        if isinstance(body, SchemaIn) and body.dry_run:  # a what-if: nothing is recorded
            return dry_run(ctx.graph, command, body)
        (rec,) = scoped.record([command])
        d = rec.decision
        if rec.refused:
            return problem(d["reason"], d["detail"], version=rec.version, decision=decision_json(d))
        if d["kind"] == "rejected":
            return problem(
                d["reason"],
                d["detail"],
                status=status_for(d["reason"]),
                version=rec.version,
                decision=decision_json(d),
            )
        return receipt_json(rec)

    @r.post("/v1/commands", response_model=BatchOut, name="post_commands", operation_id="commands")
    def post_commands(request: Request, body: BatchIn) -> Any:
        """Several commands in one request, decided in order in one synced write.

        Each item is a command body with its ``type``, checked as its own route would check
        it (a refused item is recorded as ``refused``, as there). The answer lists one result
        per item, in order, with the status its own route would have answered. At most
        ``max_batch`` items (``serve --max-batch``); past it the request is refused with 413
        and nothing is recorded. Without a valid token the request is refused with one 401
        before any item is looked at, and nothing is recorded.
        """
        scoped = ctx.scoped(request)
        lim = ctx.access.limits
        if len(body.commands) > lim.max_batch:
            raise LimitError(
                "too_large",
                "--max-batch",
                f"{len(body.commands)} commands in one request; at most {lim.max_batch}",
            )
        if any(isinstance(c, SchemaIn) and (c.dry_run or c.what_if) for c in body.commands):
            raise InputError("a dry-run publish goes to POST /v1/commands/publish_schema alone")
        commands = [
            scoped.command(
                item.type,
                item.fields(),
                declared=item.agent,
                task=item.task,
                command_id=item.command_id,
                where=f"commands[{i}]: ",
            )
            for i, item in enumerate(body.commands)
        ]
        out = []
        for rec in scoped.record(commands):
            status = status_for(rec.decision["reason"]) if rec.kind == "rejected" else 200
            out.append({"status": status, **receipt_json(rec)})
        return {"results": out}

    for spec in CLIENT_COMMANDS:
        _add(r, spec, BODIES[spec.type], write)

    @r.post("/v1/commands/{name}", include_in_schema=False)
    def system_only(request: Request, name: str) -> Any:
        """A command type no client may send: refused and recorded; an unknown one is a 404
        that lists the command types."""
        spec = COMMANDS.get(name)
        if spec is None:
            names = ", ".join(s.type for s in CLIENT_COMMANDS)
            hint = " (assert and deny are claims: POST /v1/commands/claim with polarity)"
            return problem(
                "not_found",
                f"no command type {clean(name, 80)!r}; the command routes are "
                f"/v1/commands/<type> for {names}" + (hint if name in ("assert", "deny") else ""),
                command_types=[s.type for s in CLIENT_COMMANDS],
            )
        scoped = ctx.scoped(request)  # 401 before anything: nothing recorded
        (rec,) = scoped.record([scoped.command(name, {}, task="")])
        d = rec.decision
        return problem(d["reason"], d["detail"], version=rec.version, decision=decision_json(d))

    return r


def _add(r: APIRouter, spec: CommandSpec, body: type[In], write: Any) -> None:
    """Register ``POST /v1/commands/<type>`` with ``body`` as its request body."""

    def handler(request: Request, body: In) -> Any:
        return write(request, spec, body)

    handler.__annotations__ = {"request": Request, "body": body, "return": Any}
    handler.__name__ = f"post_{spec.type}"
    role = {Sender.ADMIN: " — admin role", Sender.RESOLVER: " — resolver role"}
    handler.__doc__ = spec.summary + role.get(spec.sender, "")
    answer = PublishAnswer if spec.type == "publish_schema" else ReceiptAnswer
    r.post(
        f"/v1/commands/{spec.type}",
        name=handler.__name__,
        operation_id=spec.type,
        **described(answer, Any),
    )(handler)
