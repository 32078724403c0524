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
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Path, Query, Request

from claimgraph.core.model import LIMITS
from claimgraph.errors import InputError
from claimgraph.http.answers import (
    GraphPageAnswer,
    HeadAnswer,
    QuarantineAnswer,
    ReadEdgesAnswer,
    WhoamiAnswer,
    described,
)
from claimgraph.http.bodies import I64, PROBLEM_RESPONSES, AtQuery, EdgesIn, TimeoutQuery
from claimgraph.http.context import Context, browsable, cursor_of, key_of
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

    @r.get("/v1/head", operation_id="head", **described(HeadAnswer))
    async def get_head(request: Request) -> dict[str, Any]:
        """The newest applied version, and the graph's name."""
        ctx.principal(request)
        return {"graph": graph.name, "head": graph.head()}

    @r.get("/v1/versions/{version}", operation_id="wait_version", **described(HeadAnswer))
    async def wait_version(
        request: Request,
        version: Annotated[int, Path(ge=-1, le=I64)],
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """Wait until ``version`` is applied (read-your-writes); 409 if it did not arrive."""
        p = ctx.principal(request)
        await at_of(ctx, ctx.access.of(p), version, timeout)
        return {"graph": graph.name, "head": graph.head()}

    @r.get("/v1/whoami", operation_id="whoami", **described(WhoamiAnswer))
    async def whoami(request: Request) -> dict[str, Any]:
        """The principal the bearer token maps to."""
        return ctx.principal(request).as_dict()

    @r.post("/v1/read/edges", operation_id="read_edges", **described(ReadEdgesAnswer))
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

    @r.get("/v1/quarantine", operation_id="quarantine", **described(QuarantineAnswer))
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

    @r.get("/v1/graph", operation_id="edges", **described(GraphPageAnswer))
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

    return r
