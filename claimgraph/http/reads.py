"""Reads over HTTP: every read at a version, through the service layer.

Reads run on the event loop: rows at a version at or below head never change, so a read needs
no lock. Waiting for a version that has not arrived yet takes one of the principal's wait
slots (``max_waits``; past it, 429 at once) and a thread of its own — never one of the
workers that writes run on, and never the graph's lock — for at most ``max_wait`` seconds.

The reads that can meet a quarantine (edge, edges, slot, neighbors, paths, reach) take
``run``: a run the server holds for this principal (``POST /v1/runs``) serves them at its
pinned version and traces them; any other run id is the client's own run (the SDK's), which
reports its blocked reads itself. Without ``run`` a read is outside an explicit run: a
quarantined slot it meets counts once per (principal, conflict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import APIRouter, Path, Query, Request

from claimgraph.core.model import LIMITS
from claimgraph.errors import InputError, NotFoundError
from claimgraph.http.bodies import I64, PROBLEM_RESPONSES, AtQuery, EdgesIn, TimeoutQuery
from claimgraph.http.context import Context, browsable, cursor_of, decision_json, key_of
from claimgraph.service.access import Scoped
from claimgraph.service.api import node
from claimgraph.service.runs import Run

__all__ = ["RunQuery", "router", "served"]

T = TypeVar("T")
RunQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=LIMITS["id"],
        description="Read in this run: one the server holds for you (POST /v1/runs), at its "
        "pinned version and traced; or your own (the SDK's), which reports its blocked reads.",
    ),
]


async def at_of(ctx: Context, scoped: Scoped, at: int | None, timeout: float) -> int:
    """The version to read at: head, or ``at`` once applied (waiting in a wait slot)."""
    graph = ctx.graph
    if at is None:
        return graph.head()
    if at > graph.head():
        timeout = min(timeout, ctx.access.limits.max_wait)
        if timeout <= 0:
            graph.wait_for(at, 0.0)  # raises VersionNotYetAvailable, or head just got there
            return at
        with scoped.waiting():
            # a limiter of its own: the wait never takes a token of the pool writes use
            await anyio.to_thread.run_sync(
                graph.wait_for,
                at,
                timeout,
                limiter=anyio.CapacityLimiter(1),
            )
    return at


async def served(
    ctx: Context,
    scoped: Scoped,
    run_id: str | None,
    at: int | None,
    timeout: float,
    in_run: Callable[[Run], T],
    at_version: Callable[[int], T],
) -> T:
    """A read in the run ``run_id`` names, or at a version outside any run (see the module);
    a blocked read met outside a run is reported (off the event loop) before it answers."""
    run = scoped.run_of(run_id) if run_id else None  # 403: another principal's run
    if run is not None:
        if at is not None and at != run.version:
            raise InputError(
                f"run {run.run_id!r} is pinned at version {run.version}: read it without at="
            )
        return in_run(run)
    v = await at_of(ctx, scoped, at, timeout)
    if run_id:
        with scoped.in_client_run():
            return at_version(v)
    out = at_version(v)
    if scoped.pending_reports():
        await anyio.to_thread.run_sync(scoped.report_blocked)
    return out


IdQuery = Annotated[str, Query(min_length=1, max_length=LIMITS["id"])]
PathId = Annotated[str, Path(min_length=1, max_length=LIMITS["id"])]
CursorQuery = Annotated[
    str | None,
    Query(max_length=4 * LIMITS["id"], description="next_cursor of the page before"),
]
SearchQuery = Annotated[
    str,
    Query(max_length=LIMITS["id"], description="case-insensitive substring to search for"),
]
NodeQuery = Annotated[str, Query(alias="node", min_length=1, max_length=LIMITS["id"])]


def router(ctx: Context) -> APIRouter:
    """The read routes over ``ctx.graph``."""
    r = APIRouter(tags=["reads"], responses=PROBLEM_RESPONSES)
    graph = ctx.graph

    def with_claims(c: dict[str, Any], v: int) -> dict[str, Any]:
        out = dict(c)
        out["claim_details"] = [graph.claim_info(x, at=v) for x in c.get("members", [])]
        return out

    @r.get("/v1/head")
    async def get_head(request: Request) -> dict[str, Any]:
        """The newest applied version, and the graph's name."""
        ctx.principal(request)
        return {"graph": graph.name, "head": graph.head()}

    @r.get("/v1/versions/{version}")
    async def wait_version(
        request: Request,
        version: Annotated[int, Path(ge=-1, le=I64)],
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Wait until ``version`` is applied (read-your-writes); 409 if it did not arrive."""
        p = ctx.principal(request)
        await at_of(ctx, ctx.access.of(p), version, timeout)
        return {"graph": graph.name, "head": graph.head()}

    @r.get("/v1/whoami")
    async def whoami(request: Request) -> dict[str, Any]:
        """The principal the bearer token maps to."""
        return ctx.principal(request).as_dict()

    @r.get("/v1/edge")
    async def get_edge(
        request: Request,
        edge_type: IdQuery,
        subject: IdQuery,
        object: IdQuery,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        run: RunQuery = None,
    ) -> dict[str, Any]:
        """One edge at a version: present, absent or unknown (with the conflict id)."""
        scoped = ctx.scoped(request)
        s, o = node(subject), node(object)
        e = await served(
            ctx, scoped, run, at, timeout,
            lambda r: r.edge(edge_type, s, o),
            lambda v: scoped.edge(edge_type, s, o, at=v),
        )  # fmt: skip
        return e.as_dict()

    @r.post("/v1/read/edges")
    async def read_edges(request: Request, body: EdgesIn) -> dict[str, Any]:
        """Several edges at one version (head by default), in order: one answer each, as
        ``GET /v1/edge`` gives it. At most ``max_batch`` edges (``serve --max-batch``)."""
        scoped = ctx.scoped(request)
        wanted: Any = [(e.edge_type, node(e.subject), node(e.object)) for e in body.edges]
        scoped.bound(len(wanted), "edges")  # 413 before any wait, nothing read
        out = await served(
            ctx, scoped, body.run, body.at, body.timeout,
            lambda r: (r.version, r.read_edges(wanted)),
            lambda v: (v, scoped.read_edges(wanted, at=v)),
        )  # fmt: skip
        return {"version": out[0], "edges": [e.as_dict() for e in out[1]]}

    @r.get("/v1/slot")
    async def get_slot(
        request: Request,
        edge_type: IdQuery,
        node_: NodeQuery,
        direction: Literal["out", "in"] = "out",
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        run: RunQuery = None,
    ) -> dict[str, Any]:
        """What an exclusive slot holds at a version."""
        scoped = ctx.scoped(request)
        n = node(node_)
        v = await served(
            ctx, scoped, run, at, timeout,
            lambda r: r.slot(edge_type, n, direction=direction),
            lambda v: scoped.slot(edge_type, n, direction=direction, at=v),
        )  # fmt: skip
        return v.as_dict()

    @r.get("/v1/neighbors")
    async def get_neighbors(
        request: Request,
        node_: NodeQuery,
        edge_type: Annotated[str | None, Query(max_length=LIMITS["id"])] = None,
        direction: Literal["out", "in"] = "out",
        include_absent: bool = False,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
        writer: Annotated[str | None, Query(max_length=LIMITS["id"])] = None,
        asserted_after: Annotated[int | None, Query(ge=0, le=I64)] = None,
        asserted_before: Annotated[int | None, Query(ge=0, le=I64)] = None,
        run: RunQuery = None,
    ) -> dict[str, Any]:
        """A node's neighbours at a version; filters keep an edge when one of its claims has
        at least ``min_confidence``, is ``writer``'s, or was asserted after / before a time
        (epoch milliseconds, exclusive)."""
        scoped = ctx.scoped(request)
        n = node(node_)
        filters: dict[str, Any] = {
            "min_confidence": min_confidence, "writer": writer,
            "asserted_after": asserted_after, "asserted_before": asserted_before,
        }  # fmt: skip
        filters = {k: x for k, x in filters.items() if x is not None}
        v, ns = await served(
            ctx, scoped, run, at, timeout,
            lambda r: (r.version, r.neighbors(
                n, edge_type=edge_type, direction=direction, include_absent=include_absent,
                **filters,
            )),
            lambda v: (v, scoped.neighbors(
                n, edge_type=edge_type, direction=direction, include_absent=include_absent,
                at=v, **filters,
            )),
        )  # fmt: skip
        return {"version": v, "neighbors": [x.as_dict() for x in ns]}

    @r.get("/v1/history")
    async def get_history(
        request: Request,
        edge_type: IdQuery,
        subject: IdQuery,
        object: IdQuery,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Every decision that touched an edge, up to a version, oldest first. After GC,
        ``cut_below`` is the version from which on it is complete when entries below it were
        removed (null: nothing was cut)."""
        p = ctx.principal(request)
        s, o = node(subject), node(object)
        v = await at_of(ctx, ctx.access.of(p), at, timeout)
        return graph.history(edge_type, s, o, at=v).as_dict()

    @r.get("/v1/quarantine")
    async def get_quarantine(
        request: Request,
        include_closed: bool = False,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        limit: Annotated[int | None, Query(ge=1, le=500)] = None,
        cursor: CursorQuery = None,
        q: SearchQuery = "",
    ) -> dict[str, Any]:
        """Conflicts withheld from the readable graph, each with its claims' full evidence.

        All of them; or, with ``limit``, ``cursor`` or ``q``, one page of at most ``limit``
        (default 20) matching ``q`` (id, edge type, slot nodes, claim ids, writers):
        ``next_cursor`` is set, and ``truncated`` true, whenever more may follow."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, timeout)
        if limit is None and cursor is None and not q:
            cs = graph.quarantine(at=v, include_closed=include_closed)
            return {"version": v, "conflicts": [with_claims(c, v) for c in cs]}
        page = browsable(graph).quarantine_page(
            at=v, after=key_of(cursor), q=q, limit=limit or 20, include_closed=include_closed
        )
        return {
            "version": v,
            "conflicts": [with_claims(c, v) for c in page.items],
            "next_cursor": cursor_of(page.after),
            "truncated": page.truncated,
            "scanned": page.scanned,
        }

    @r.get("/v1/escalations")
    async def get_escalations(
        request: Request, at: AtQuery = None, include_open: bool = False
    ) -> dict[str, Any]:
        """Escalated conflicts (every open one with ``include_open``), each a self-contained
        evidence payload: the claims side by side with owners, confidence, calibrated accuracy,
        evidence and the versions each writer read; signals, votes, fallback, recommendation."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        return {"version": v, "escalations": graph.escalations(at=v, include_open=include_open)}

    @r.get("/v1/escalations/{conflict_id}")
    async def get_escalation(request: Request, conflict_id: PathId, at: AtQuery = None) -> Any:
        """One conflict's self-contained escalation payload, at a version."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        payload = graph.escalation(conflict_id, at=v)
        if payload is None:
            raise NotFoundError(f"no conflict {conflict_id[:80]!r} at version {v}")
        return payload

    @r.get("/v1/calibration")
    async def get_calibration(
        request: Request, edge_type: IdQuery, at: AtQuery = None
    ) -> dict[str, Any]:
        """Each writer's resolved-conflict record for an edge type (wins, losses)."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        record = graph.calibration(edge_type, at=v)
        return {"version": v, "edge_type": edge_type, "record": record}

    @r.get("/v1/claims/{claim_id}")
    async def get_claim(request: Request, claim_id: PathId, at: AtQuery = None) -> Any:
        """A claim's record and status at a version."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        info = graph.claim_info(claim_id, at=v)
        if info is None:
            raise NotFoundError(f"no claim {claim_id[:80]!r} at version {v}")
        return info

    @r.get("/v1/conflicts/{conflict_id}")
    async def get_conflict(request: Request, conflict_id: PathId, at: AtQuery = None) -> Any:
        """A conflict at a version, with its claims' full evidence."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        c = graph.conflict(conflict_id, at=v)
        if c is None:
            raise NotFoundError(f"no conflict {conflict_id[:80]!r} at version {v}")
        return with_claims(c, v)

    @r.get("/v1/schema")
    async def get_schema(request: Request, at: AtQuery = None) -> Any:
        """The graph schema in force at a version."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        row = graph.schema_info(at=v)
        if row is None:
            raise NotFoundError(f"no schema is in force at version {v}")
        return row

    @r.get("/v1/graph")
    async def get_graph(
        request: Request,
        at: AtQuery = None,
        limit: Annotated[int, Query(ge=1, le=5000)] = 500,
        cursor: CursorQuery = None,
        q: SearchQuery = "",
    ) -> dict[str, Any]:
        """One page of the graph's edges at a version (present and unknown) in key order,
        after ``cursor``, matching ``q`` (edge type, subject, object): ``next_cursor`` is set,
        and ``truncated`` true, whenever more may follow."""
        p = ctx.principal(request)
        v = await at_of(ctx, ctx.access.of(p), at, 0.0)
        page = browsable(graph).edges_page(at=v, after=key_of(cursor), q=q, limit=limit)
        return {
            "version": v,
            "head": graph.head(),
            "edges": [e.as_dict() for e in page.items],
            "next_cursor": cursor_of(page.after),
            "truncated": page.truncated,
            "scanned": page.scanned,
        }

    @r.get("/v1/decisions")
    def get_decisions(
        request: Request,
        start: Annotated[int, Query(alias="from", ge=0, le=I64)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """The decisions log from a version on."""
        ctx.principal(request)
        ds = graph.decisions(start, limit)
        return {"decisions": [{**decision_json(d), "version": v} for v, d in ds]}

    return r
