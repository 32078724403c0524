"""The HTTP API: commands as authenticated principals, reads at any version, runs, review page.

:func:`create_app` wires a graph transport (the embedded :class:`~claimgraph.service.graph.Graph` or
the Kafka-backed graph), a :class:`~claimgraph.http.auth.TokenFile` and, for graphs that
require signatures, the ingress :class:`~claimgraph.service.signers.Signer` into a FastAPI app.
Every
route is thin: it checks the caller's token, calls the graph, and maps our errors to
problem+json (:mod:`claimgraph.http.problems`).

Identity comes from the bearer token only. A write whose declared ``agent`` is not the token's
principal, whose task the principal may not act in, or which needs a role the principal lacks
is refused with 401/403 *and recorded*: a ``refused`` command goes to the log and the governor
rejects it with the same reason, so the refusal has a version and nothing else changes.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Annotated, Any, Literal, cast

from fastapi import Body, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from claimgraph import __version__
from claimgraph.core.model import LIMITS, Command, Decision, Reason
from claimgraph.core.wire import encode_command
from claimgraph.errors import ClaimgraphError, InputError, NotFoundError, RunNotFound
from claimgraph.http.auth import Principal, TokenFile
from claimgraph.http.bodies import (
    ADMIN_TYPES,
    I64,
    PROBLEM_RESPONSES,
    AtQuery,
    ClaimIn,
    EscalateIn,
    GrantIn,
    In,
    ReadBlockedIn,
    RegisterKeyIn,
    ResolveIn,
    RetractIn,
    RevokeIn,
    RevokeKeyIn,
    RunEventsIn,
    SchemaIn,
    TickIn,
    TimeoutQuery,
)
from claimgraph.http.problems import error_problem, problem, status_for
from claimgraph.service.api import Receipt, node
from claimgraph.service.escalations import escalations as escalation_payloads
from claimgraph.service.runs import READ_OPS, check_event
from claimgraph.service.signers import Signer

__all__ = ["create_app", "decision_json", "openapi_document", "receipt_json"]


def decision_json(d: Decision) -> dict[str, Any]:
    """A decision as JSON (bytes as hex)."""
    out = dict(d)
    if d["key"] is not None:
        out["key"] = {**d["key"], "public_key": d["key"]["public_key"].hex()}
    return out


def receipt_json(r: Receipt) -> dict[str, Any]:
    return {
        "command_id": r.command_id,
        "position": r.position,
        "version": r.version,
        "decision": decision_json(r.decision),
    }


def _clean(value: str, limit: int = LIMITS["id"]) -> str:
    """Text safe to put in a record: valid UTF-8, bounded."""
    return value.encode("utf-8", "replace").decode("utf-8")[:limit]


# -- the app ----------------------------------------------------------------------------------


def create_app(graph: Any, tokens: TokenFile, *, signer: Signer | None = None) -> FastAPI:
    """The HTTP API over ``graph`` (embedded or Kafka), authenticating with ``tokens``."""
    app = FastAPI(
        title="claimgraph",
        version=__version__,
        description="A governed, event-sourced knowledge graph: every edge is a claim, "
        "every read is at a version. Authenticate with `Authorization: Bearer TOKEN`.",
    )
    lock: threading.RLock = getattr(graph, "_lock", None) or threading.RLock()

    @contextmanager
    def locked() -> Iterator[None]:
        with lock:
            yield

    # -- errors ---------------------------------------------------------------------------------

    @app.exception_handler(ClaimgraphError)
    async def _ours(request: Request, exc: ClaimgraphError) -> JSONResponse:
        return error_problem(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return problem(
            Reason.INVALID_FIELD,
            f"{where}: {first.get('msg', 'invalid')}"[:500],
            errors=[{"loc": [str(x) for x in e.get("loc", ())], "msg": e["msg"]} for e in errs],
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "malformed")
        return problem(reason, str(exc.detail), status=exc.status_code)

    # -- identity ------------------------------------------------------------------------------

    def bearer(request: Request) -> str | None:
        h = request.headers.get("authorization", "")
        scheme, _, token = h.partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def reader_principal(request: Request) -> Principal:
        p = tokens.principal(bearer(request))
        if p is None:
            from claimgraph.errors import AuthError

            raise AuthError(Reason.UNAUTHENTICATED.value, "a valid bearer token is needed", 401)
        return p

    def submit(command: Command) -> Receipt:
        try:
            data = encode_command(command)
        except (TypeError, ValueError) as exc:  # e.g. text that is not valid UTF-8
            raise InputError(f"cannot encode the command: {exc}") from None
        if signer is not None:
            data = signer.sign(data)
        with locked():
            r: Receipt = graph.submit([data])[0]
        return r

    def refuse(
        ctype: str, reason: Reason, detail: str, agent: str, declared: str | None, task: str
    ) -> JSONResponse:
        r = submit(
            cast(
                Command,
                {
                    "type": "refused",
                    "command_id": f"refused-{uuid.uuid4()}",
                    "graph": graph.name,
                    "agent": agent,
                    "task": _clean(task),
                    "reason": reason.value,
                    "detail": detail,
                    "declared_agent": _clean(declared or ""),
                    "refused_type": ctype,
                },
            )
        )
        return problem(
            reason.value,
            detail,
            version=r.version,
            decision=decision_json(r.decision),
        )

    def write(request: Request, ctype: str, body: In, fields: dict[str, Any]) -> Any:
        token = bearer(request)
        p = tokens.principal(token)
        declared, task = body.agent, body.task
        if p is None:
            what = "no bearer token" if token is None else "an unknown bearer token"
            return refuse(
                ctype, Reason.UNAUTHENTICATED, f"the request carried {what}", "anonymous",
                declared, task,
            )  # fmt: skip
        if declared is not None and declared != p.agent:
            return refuse(
                ctype,
                Reason.AGENT_MISMATCH,
                f"the token belongs to {p.agent!r}; it may not act as {_clean(declared, 80)!r}",
                p.agent,
                declared,
                task,
            )
        if not p.may_act_in(task):
            return refuse(
                ctype,
                Reason.TASK_NOT_ALLOWED,
                f"{p.agent!r} may act in tasks {', '.join(p.tasks)}, not {_clean(task, 80)!r}",
                p.agent,
                declared,
                task,
            )
        if ctype in ADMIN_TYPES and not p.admin:
            return refuse(
                ctype, Reason.NOT_ADMIN, f"{p.agent!r} has no admin role", p.agent, declared, task
            )
        if ctype in ("resolve", "escalate") and not p.resolver:
            return refuse(
                ctype,
                Reason.NOT_RESOLVER,
                f"{p.agent!r} has no resolver role",
                p.agent,
                declared,
                task,
            )
        command = {
            "type": ctype,
            "command_id": body.command_id or str(uuid.uuid4()),
            "graph": graph.name,
            "agent": p.agent,
            "task": task,
            **fields,
        }
        r = submit(cast(Command, command))
        d = r.decision
        if d["kind"] == "rejected":
            return problem(
                d["reason"],
                d["detail"],
                status=status_for(d["reason"]),
                version=r.version,
                decision=decision_json(d),
            )
        return receipt_json(r)

    # -- commands -----------------------------------------------------------------------------

    W: dict[str, Any] = {"responses": PROBLEM_RESPONSES, "tags": ["commands"]}

    @app.post("/v1/commands/claim", **W)
    def post_claim(request: Request, body: ClaimIn) -> Any:
        """Assert or deny an edge as the token's principal."""
        from claimgraph.service.inputs import now_millis

        s, o = node(body.subject), node(body.object)
        return write(
            request,
            "claim",
            body,
            {
                "run_id": body.run_id,
                "edge_type": body.edge_type,
                "subject_type": s[0],
                "subject_id": s[1],
                "object_type": o[0],
                "object_id": o[1],
                "polarity": body.polarity,
                "confidence": body.confidence,
                "evidence": body.evidence,
                "reasoning": body.reasoning,
                "asserted_at": now_millis() if body.asserted_at is None else body.asserted_at,
                "based_on_version": body.based_on_version,
                "properties": body.properties,
            },
        )

    @app.post("/v1/commands/retract", **W)
    def post_retract(request: Request, body: RetractIn) -> Any:
        """Withdraw one of the principal's own claims."""
        fields = {"run_id": None, "claim_id": body.claim_id, "reason": body.reason}
        return write(request, "retract", body, fields)

    @app.post("/v1/commands/resolve", **W)
    def post_resolve(request: Request, body: ResolveIn) -> Any:
        """A resolver's verdict on a conflict: a winning claim, or none (reject all)."""
        return write(
            request,
            "resolve",
            body,
            {
                "conflict_id": body.conflict_id,
                "winner": body.winner,
                "resolver": body.resolver,
                "rationale": body.rationale,
                "inputs": body.inputs,
            },
        )

    @app.post("/v1/commands/escalate", **W)
    def post_escalate(request: Request, body: EscalateIn) -> Any:
        """Hand a conflict to a person: it stays quarantined, now escalated — resolver role."""
        fields = {"conflict_id": body.conflict_id, "reason": body.reason, "resolver": body.resolver}
        return write(request, "escalate", body, fields)

    @app.post("/v1/commands/read_blocked", **W)
    def post_read_blocked(request: Request, body: ReadBlockedIn) -> Any:
        """Report reads that hit a quarantined slot (counted toward its exit conditions)."""
        fields = {"conflict_id": body.conflict_id, "count": body.count, "run_id": body.run_id}
        return write(request, "read_blocked", body, fields)

    @app.post("/v1/commands/publish_schema", **W)
    def post_schema(request: Request, body: SchemaIn) -> Any:
        """Publish a graph schema (YAML) — admin role."""
        fields = {"document": body.document, "source": body.source}
        return write(request, "publish_schema", body, fields)

    @app.post("/v1/commands/grant", **W)
    def post_grant(request: Request, body: GrantIn) -> Any:
        """Grant extra write scope — admin role."""
        return write(
            request,
            "grant",
            body,
            {
                "grantee_agent": body.grantee_agent,
                "grantee_task": body.grantee_task,
                "edge_type": body.edge_type,
                "expires_at": body.expires_at,
            },
        )

    @app.post("/v1/commands/revoke", **W)
    def post_revoke(request: Request, body: RevokeIn) -> Any:
        """Revoke a grant — admin role."""
        return write(request, "revoke", body, {"grant_id": body.grant_id})

    @app.post("/v1/commands/register_key", **W)
    def post_register_key(request: Request, body: RegisterKeyIn) -> Any:
        """Register an Ed25519 public key for direct log producers — admin role."""
        fields = {
            "key_id": body.key_id,
            "key_agent": body.key_agent,
            "public_key": bytes.fromhex(body.public_key),
        }
        return write(request, "register_key", body, fields)

    @app.post("/v1/commands/revoke_key", **W)
    def post_revoke_key(request: Request, body: RevokeKeyIn) -> Any:
        """Revoke a signing key — admin role."""
        return write(request, "revoke_key", body, {"key_id": body.key_id})

    @app.post("/v1/commands/tick", **W)
    def post_tick(request: Request, body: Annotated[TickIn, Body()]) -> Any:
        """Write a tick (time advances for the governor only through the log)."""
        return write(request, "tick", body, {})

    # -- versions and reads ----------------------------------------------------------------------

    R: dict[str, Any] = {"responses": PROBLEM_RESPONSES, "tags": ["reads"]}
    # Reads run on the event loop and go to the projection reader directly: rows at a version
    # at or below head never change, so they need no lock; only waiting for a version that
    # has not arrived yet is handed to a worker thread.

    def reads(request: Request) -> Principal:
        return reader_principal(request)

    async def at_of(at: int | None, timeout: float) -> int:
        if at is None:
            return int(graph.head())
        if at > graph.head():
            await run_in_threadpool(graph.wait_for, at, timeout)
        return at

    @app.get("/v1/head", **R)
    async def get_head(request: Request) -> dict[str, Any]:
        """The newest applied version, and the graph's name."""
        reads(request)
        return {"graph": graph.name, "head": graph.head()}

    @app.get("/v1/versions/{version}", **R)
    async def wait_version(
        request: Request,
        version: Annotated[int, Path(ge=-1, le=I64)],
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Wait until ``version`` is applied (read-your-writes); 409 if it did not arrive."""
        reads(request)
        await at_of(version, timeout)
        return {"graph": graph.name, "head": graph.head()}

    @app.get("/v1/whoami", **R)
    async def whoami(request: Request) -> dict[str, Any]:
        """The principal the bearer token maps to."""
        return reads(request).as_dict()

    @app.get("/v1/edge", **R)
    async def get_edge(
        request: Request,
        edge_type: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        subject: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        object: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """One edge at a version: present, absent or unknown (with the conflict id)."""
        reads(request)
        s, o = node(subject), node(object)
        v = await at_of(at, timeout)
        return graph.reader.edge(edge_type, s, o, v).as_dict()  # type: ignore[no-any-return]

    @app.get("/v1/slot", **R)
    async def get_slot(
        request: Request,
        edge_type: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        node_: Annotated[str, Query(alias="node", min_length=1, max_length=LIMITS["id"])],
        direction: Literal["out", "in"] = "out",
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """What an exclusive slot holds at a version."""
        reads(request)
        n = node(node_)
        v = await at_of(at, timeout)
        return graph.reader.slot(edge_type, n, v, direction).as_dict()  # type: ignore[no-any-return]

    @app.get("/v1/neighbors", **R)
    async def get_neighbors(
        request: Request,
        node_: Annotated[str, Query(alias="node", min_length=1, max_length=LIMITS["id"])],
        edge_type: Annotated[str | None, Query(max_length=LIMITS["id"])] = None,
        direction: Literal["out", "in"] = "out",
        include_absent: bool = False,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """A node's neighbours at a version."""
        reads(request)
        n = node(node_)
        v = await at_of(at, timeout)
        ns = graph.reader.neighbors(
            n, v, edge_type=edge_type, direction=direction, include_absent=include_absent
        )
        return {"version": v, "neighbors": [x.as_dict() for x in ns]}

    @app.get("/v1/history", **R)
    async def get_history(
        request: Request,
        edge_type: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        subject: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        object: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Every decision that touched an edge, up to a version."""
        reads(request)
        s, o = node(subject), node(object)
        v = await at_of(at, timeout)
        return {"version": v, "history": graph.reader.history(edge_type, s, o, v)}

    def claim_info(claim_id: str, v: int) -> dict[str, Any] | None:
        return graph.reader.claim(claim_id, v)  # type: ignore[no-any-return]

    def with_claims(c: dict[str, Any], v: int) -> dict[str, Any]:
        out = dict(c)
        out["claim_details"] = [claim_info(x, v) for x in c.get("members", [])]
        return out

    @app.get("/v1/quarantine", **R)
    async def get_quarantine(
        request: Request,
        include_closed: bool = False,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Conflicts withheld from the readable graph, each with its claims' full evidence."""
        reads(request)
        v = await at_of(at, timeout)
        cs = graph.reader.quarantine(v, include_closed=include_closed)
        return {"version": v, "conflicts": [with_claims(c, v) for c in cs]}

    @app.get("/v1/escalations", **R)
    async def get_escalations(
        request: Request, at: AtQuery = None, include_open: bool = False
    ) -> dict[str, Any]:
        """Escalated conflicts (every open one with ``include_open``), each a self-contained
        evidence payload: the claims side by side with owners, confidence, calibrated accuracy,
        evidence and the versions each writer read; signals, votes, fallback, recommendation."""
        reads(request)
        v = await at_of(at, 0.0)
        payloads = escalation_payloads(graph.reader, graph.name, v, include_open=include_open)
        return {"version": v, "escalations": payloads}

    @app.get("/v1/calibration", **R)
    async def get_calibration(
        request: Request,
        edge_type: Annotated[str, Query(min_length=1, max_length=LIMITS["id"])],
        at: AtQuery = None,
    ) -> dict[str, Any]:
        """Each writer's resolved-conflict record for an edge type (wins, losses)."""
        reads(request)
        v = await at_of(at, 0.0)
        record = graph.reader.calibration(edge_type, v)
        return {"version": v, "edge_type": edge_type, "record": record}

    @app.get("/v1/claims/{claim_id}", **R)
    async def get_claim(request: Request, claim_id: str, at: AtQuery = None) -> Any:
        """A claim's record and status at a version."""
        reads(request)
        v = await at_of(at, 0.0)
        info = claim_info(claim_id, v)
        if info is None:
            raise NotFoundError(f"no claim {claim_id[:80]!r} at version {v}")
        return info

    @app.get("/v1/conflicts/{conflict_id}", **R)
    async def get_conflict(request: Request, conflict_id: str, at: AtQuery = None) -> Any:
        """A conflict at a version, with its claims' full evidence."""
        reads(request)
        v = await at_of(at, 0.0)
        c = graph.reader.conflict(conflict_id, v)
        if c is None:
            raise NotFoundError(f"no conflict {conflict_id[:80]!r} at version {v}")
        return with_claims(c, v)

    @app.get("/v1/schema", **R)
    async def get_schema(request: Request, at: AtQuery = None) -> Any:
        """The graph schema in force at a version."""
        reads(request)
        v = await at_of(at, 0.0)
        row = graph.reader.schema_row(v)
        if row is None:
            raise NotFoundError(f"no schema is in force at version {v}")
        return row

    @app.get("/v1/graph", **R)
    async def get_graph(
        request: Request,
        at: AtQuery = None,
        limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    ) -> dict[str, Any]:
        """The graph's edges at a version (present and unknown), for the review page."""
        reads(request)
        v = await at_of(at, 0.0)
        edges = graph.reader.edges(v, limit=limit)
        return {"version": v, "head": graph.head(), "edges": [e.as_dict() for e in edges]}

    @app.get("/v1/decisions", **R)
    def get_decisions(
        request: Request,
        start: Annotated[int, Query(alias="from", ge=0, le=I64)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """The decisions log from a version on."""
        reads(request)
        ds = graph.decisions(start, limit)
        return {"decisions": [{**decision_json(d), "version": v} for v, d in ds]}

    # -- runs ----------------------------------------------------------------------------------

    @app.post("/v1/runs/events", responses=PROBLEM_RESPONSES, tags=["runs"])
    def post_run_events(request: Request, body: RunEventsIn) -> dict[str, Any]:
        """Append trace events of the principal's runs to the runs log."""
        p = reader_principal(request)
        events = []
        for e in body.events:
            if e.agent is not None and e.agent != p.agent:
                from claimgraph.errors import AuthError

                raise AuthError(
                    Reason.AGENT_MISMATCH.value,
                    f"the token belongs to {p.agent!r}, not to {_clean(e.agent, 80)!r}",
                )
            ev = e.model_dump()
            ev.update(graph=graph.name, agent=p.agent)
            check_event(ev)
            events.append(ev)
        try:
            from claimgraph.service.runs import encode_events

            encode_events(events)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot encode the events: {exc}") from None
        with locked():
            _pin_runs(events, p.agent)  # first: a start at a pruned version is refused whole
            graph.append_run_events(events)
        return {"appended": len(events)}

    def _pin_runs(events: list[dict[str, Any]], agent: str) -> None:
        """A run's retention pin, held by the server for runs of remote clients: taken at
        its ``start`` event (1 h lease), released at its ``end``."""
        from claimgraph.service.runs import _pins_of

        registry = _pins_of(graph)
        if registry is None:
            return
        for ev in events:
            owner = f"{agent}:{ev['run_id']}"
            if ev["kind"] == "start" and ev["pinned_version"] >= 0:
                registry.pin(ev["pinned_version"], owner=owner, lease=3600.0)
            elif ev["kind"] == "end":
                for pin in registry.live():
                    if pin.owner == owner:
                        registry.unpin(pin.pin_id)

    @app.get("/v1/runs", responses=PROBLEM_RESPONSES, tags=["runs"])
    def get_runs(request: Request) -> dict[str, Any]:
        """Every run in the runs log: who, at which pinned version, with what outcome."""
        reads(request)
        with locked():
            return {"runs": [s.as_dict() for s in graph.runs()]}

    @app.get("/v1/runs/{run_id}", responses=PROBLEM_RESPONSES, tags=["runs"])
    def get_run(request: Request, run_id: str) -> dict[str, Any]:
        """A run's trace: its pinned version, reads (query and digest), writes, tool calls."""
        reads(request)
        with locked():
            events = graph.run_events(run_id)
        if not events:
            raise RunNotFound(run_id[:80])
        return {"run_id": run_id, "events": events}

    @app.post("/v1/runs/{run_id}/replay", responses=PROBLEM_RESPONSES, tags=["runs"])
    def replay_run(request: Request, run_id: str) -> dict[str, Any]:
        """Re-execute the run's reads at its pinned version; identical inputs, or the first
        difference."""
        reads(request)
        with locked():
            return cast(dict[str, Any], graph.replay_run(run_id).as_dict())

    # -- the review page --------------------------------------------------------------------------

    static = resources.files("claimgraph.http") / "review"

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        return Response(status_code=307, headers={"Location": "/review"})

    @app.get("/review", include_in_schema=False)
    def review() -> HTMLResponse:
        return HTMLResponse((static / "index.html").read_text(encoding="utf-8"))

    @app.get("/review/{graph_name}/conflicts/{conflict_id}", include_in_schema=False)
    def review_conflict(graph_name: str, conflict_id: str) -> HTMLResponse:
        return review()  # the escalation payloads link here; the page focuses the conflict

    @app.get("/review/{name}", include_in_schema=False)
    def review_asset(name: str) -> Response:
        types = {"app.js": "text/javascript", "style.css": "text/css"}
        if name not in types:
            return problem("not_found", f"no asset {name[:80]!r}")
        return Response((static / name).read_text(encoding="utf-8"), media_type=types[name])

    @app.get("/healthz", tags=["reads"])
    def healthz() -> dict[str, Any]:
        """Liveness: the graph's name (no token needed)."""
        return {"ok": True, "graph": graph.name}

    assert READ_OPS  # the ops a run replays are the read routes above
    return app


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (independent of any graph or token)."""
    return create_app(None, TokenFile({})).openapi()
