"""Writes over HTTP: one route per client command of the catalogue, as the token's principal.

``POST /v1/commands/<type>`` for every client command (:mod:`claimgraph.core.commands`); the
body is the command's fields (:data:`claimgraph.http.bodies.BODIES`). Identity comes from the
bearer token only. A write whose declared ``agent`` is not the token's principal, whose task
the principal may not act in, or which needs a role the principal lacks is refused with
401/403 *and recorded*: a ``refused`` command goes to the log and the governor rejects it
with the same reason, so the refusal has a version and nothing else changes. A command type
only the system writes (``tick``, ``signed``, ``refused``, ``invalid_input``) is refused the
same way, as ``system_only``.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from fastapi import APIRouter, Request

from claimgraph.core.commands import CLIENT_COMMANDS, COMMANDS, CommandSpec, Sender
from claimgraph.core.model import LIMITS, Command, Reason
from claimgraph.core.wire import encode_command
from claimgraph.errors import InputError, LimitError
from claimgraph.http.auth import Principal
from claimgraph.http.bodies import BODIES, PROBLEM_RESPONSES, BatchIn, BatchOut, In, SchemaIn
from claimgraph.http.context import Context, clean, decision_json, receipt_json
from claimgraph.http.problems import problem, status_for
from claimgraph.http.whatif import check_options, dry_run
from claimgraph.service.api import Receipt
from claimgraph.service.inputs import require_domain

__all__ = ["router"]

_ROLE = {
    Sender.ADMIN: ("admin", Reason.NOT_ADMIN),
    Sender.RESOLVER: ("resolver", Reason.NOT_RESOLVER),
}


def router(ctx: Context) -> APIRouter:
    """The command routes over ``ctx.graph``."""
    r = APIRouter(tags=["commands"], responses=PROBLEM_RESPONSES)
    graph = ctx.graph

    def encode(command: Command) -> bytes:
        try:
            data = encode_command(command)
        except (TypeError, ValueError) as exc:  # e.g. text that is not valid UTF-8
            raise InputError(f"cannot encode the command: {exc}") from None
        return ctx.signer.sign(data) if ctx.signer is not None else data

    def submit(command: Command) -> Receipt:
        return graph.submit([encode(command)])[0]

    def refused(
        ctype: str, reason: Reason, detail: str, agent: str, declared: str | None, task: str
    ) -> Command:
        return cast(
            Command,
            {
                "type": "refused",
                "command_id": f"refused-{uuid.uuid4()}",
                "graph": graph.name,
                "agent": agent,
                "task": clean(task),
                "reason": reason.value,
                "detail": detail[: LIMITS["detail"]],
                "declared_agent": clean(declared or ""),
                "refused_type": ctype,
            },
        )

    def command_for(
        p: Principal | None, token: str | None, spec: CommandSpec, body: In, where: str = ""
    ) -> Command:
        """The command a body makes as the token's principal, or the ``refused`` record."""
        ctype = spec.type
        declared, task = body.agent, body.task
        if p is None:
            what = "no bearer token" if token is None else "an unknown bearer token"
            return refused(
                ctype, Reason.UNAUTHENTICATED, f"the request carried {what}", "anonymous",
                declared, task,
            )  # fmt: skip
        if declared is not None and declared != p.agent:
            return refused(
                ctype,
                Reason.AGENT_MISMATCH,
                f"the token belongs to {p.agent!r}; it may not act as {clean(declared, 80)!r}",
                p.agent,
                declared,
                task,
            )
        if not p.may_act_in(task):
            return refused(
                ctype,
                Reason.TASK_NOT_ALLOWED,
                f"{p.agent!r} may act in tasks {', '.join(p.tasks)}, not {clean(task, 80)!r}",
                p.agent,
                declared,
                task,
            )
        role = _ROLE.get(spec.sender)
        if role is not None and role[0] not in p.roles and not p.admin:
            return refused(
                ctype, role[1], f"{p.agent!r} has no {role[0]} role", p.agent, declared, task
            )
        command = cast(
            Command,
            {
                "type": ctype,
                "command_id": body.command_id or str(uuid.uuid4()),
                "graph": graph.name,
                "agent": p.agent,
                "task": task,
                **body.fields(),
            },
        )
        require_domain(command, where)  # 422, nothing recorded: the catalogue's bounds
        return command

    def write(request: Request, spec: CommandSpec, body: In) -> Any:
        token = ctx.bearer(request)
        if isinstance(body, SchemaIn):
            check_options(body)
        command = command_for(ctx.tokens.principal(token), token, spec, body)
        if isinstance(body, SchemaIn) and body.dry_run:  # a what-if: nothing is recorded
            return dry_run(graph, command, body)
        rec = submit(command)
        d = rec.decision
        if command["type"] == "refused":
            c = cast(dict[str, Any], command)
            return problem(c["reason"], c["detail"], version=rec.version, decision=decision_json(d))
        if d["kind"] == "rejected":
            return problem(
                d["reason"],
                d["detail"],
                status=status_for(d["reason"]),
                version=rec.version,
                decision=decision_json(d),
            )
        return receipt_json(rec)

    @r.post("/v1/commands", response_model=BatchOut, name="post_commands")
    def post_commands(request: Request, body: BatchIn) -> Any:
        """Several commands in one request, decided in order in one synced write.

        Each item is a command body with its ``type``, checked as its own route would check
        it (a refused item is recorded as ``refused``, as there). The answer lists one result
        per item, in order, with the status its own route would have answered. At most
        ``max_batch`` items (``serve --max-batch``); past it the request is refused with 413
        and nothing is recorded.
        """
        lim = ctx.limits
        if len(body.commands) > lim.max_batch:
            raise LimitError(
                "too_large",
                "--max-batch",
                f"{len(body.commands)} commands in one request; at most {lim.max_batch}",
            )
        if any(isinstance(c, SchemaIn) and (c.dry_run or c.what_if) for c in body.commands):
            raise InputError("a dry-run publish goes to POST /v1/commands/publish_schema alone")
        token = ctx.bearer(request)
        p = ctx.tokens.principal(token)
        records = [
            encode(command_for(p, token, COMMANDS[item.type], item, f"commands[{i}]: "))
            for i, item in enumerate(body.commands)
        ]
        out = []
        for rec in graph.submit(records) if records else []:
            status = status_for(rec.decision["reason"]) if rec.kind == "rejected" else 200
            out.append({"status": status, **receipt_json(rec)})
        return {"results": out}

    for spec in CLIENT_COMMANDS:
        _add(r, spec, BODIES[spec.type], write)

    @r.post("/v1/commands/{name}", include_in_schema=False)
    def system_only(request: Request, name: str) -> Any:
        """A command type no client may send: refused and recorded; an unknown one is a 404."""
        spec = COMMANDS.get(name)
        if spec is None:
            return problem("not_found", f"no command type {clean(name, 80)!r}")
        p = ctx.tokens.principal(ctx.bearer(request))
        by = "the ticker" if spec.sender == Sender.TICKER else "the system"
        detail = f"{name} is written by {by}, never by a client"
        agent = p.agent if p is not None else "anonymous"
        rec = submit(refused(name, Reason.SYSTEM_ONLY, detail, agent, None, ""))
        return problem(
            Reason.SYSTEM_ONLY.value,
            detail,
            version=rec.version,
            decision=decision_json(rec.decision),
        )

    return r


def _add(r: APIRouter, spec: CommandSpec, body: type[In], write: Any) -> None:
    """Register ``POST /v1/commands/<type>`` with ``body`` as its request body."""

    def handler(request: Request, body: In) -> Any:
        return write(request, spec, body)

    handler.__annotations__ = {"request": Request, "body": body, "return": Any}
    handler.__name__ = f"post_{spec.type}"
    role = {Sender.ADMIN: " — admin role", Sender.RESOLVER: " — resolver role"}
    handler.__doc__ = spec.summary + role.get(spec.sender, "")
    r.post(f"/v1/commands/{spec.type}", name=handler.__name__)(handler)
