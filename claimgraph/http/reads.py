"""Reads over HTTP: every read at a version, through the graph port.

Reads run on the event loop: rows at a version at or below head never change, so a read needs
no lock. Waiting for a version that has not arrived yet takes one of the principal's wait
slots (``max_waits``; past it, 429 at once) and a thread of its own — never one of the
workers that writes run on, and never the graph's lock — for at most ``max_wait`` seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Path, Query, Request

from claimgraph.core.model import LIMITS
from claimgraph.errors import LimitError, NotFoundError
from claimgraph.http.auth import Principal
from claimgraph.http.bodies import I64, PROBLEM_RESPONSES, AtQuery, EdgesIn, TimeoutQuery
from claimgraph.http.context import Context, browsable, cursor_of, decision_json, key_of
from claimgraph.service.api import node

__all__ = ["router"]

IdQuery = Annotated[str, Query(min_length=1, max_length=LIMITS["id"])]
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

    async def at_of(p: Principal, at: int | None, timeout: float) -> int:
        if at is None:
            return graph.head()
        if at > graph.head():
            timeout = min(timeout, ctx.limits.max_wait)
            if timeout <= 0:
                graph.wait_for(at, 0.0)  # raises VersionNotYetAvailable, or head just got there
                return at
            with ctx.waits.hold(p.agent, repr(p.agent)):
                # a limiter of its own: the wait never takes a token of the pool writes use
                await anyio.to_thread.run_sync(
                    graph.wait_for,
                    at,
                    timeout,
                    limiter=anyio.CapacityLimiter(1),
                )
        return at

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
        await at_of(p, version, timeout)
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
    ) -> dict[str, Any]:
        """One edge at a version: present, absent or unknown (with the conflict id)."""
        p = ctx.principal(request)
        s, o = node(subject), node(object)
        v = await at_of(p, at, timeout)
        return graph.edge(edge_type, s, o, at=v).as_dict()

    @r.post("/v1/read/edges")
    async def read_edges(request: Request, body: EdgesIn) -> dict[str, Any]:
        """Several edges at one version (head by default), in order: one answer each, as
        ``GET /v1/edge`` gives it. At most ``max_batch`` edges (``serve --max-batch``)."""
        p = ctx.principal(request)
        if len(body.edges) > ctx.limits.max_batch:
            raise LimitError(
                "too_large",
                "--max-batch",
                f"{len(body.edges)} edges in one request; at most {ctx.limits.max_batch}",
            )
        wanted = [(e.edge_type, node(e.subject), node(e.object)) for e in body.edges]
        v = await at_of(p, body.at, body.timeout)
        edge = graph.edge
        return {"version": v, "edges": [edge(t, s, o, at=v).as_dict() for t, s, o in wanted]}

    @r.get("/v1/slot")
    async def get_slot(
        request: Request,
        edge_type: IdQuery,
        node_: NodeQuery,
        direction: Literal["out", "in"] = "out",
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
    ) -> dict[str, Any]:
        """What an exclusive slot holds at a version."""
        p = ctx.principal(request)
        n = node(node_)
        v = await at_of(p, at, timeout)
        return graph.slot(edge_type, n, direction=direction, at=v).as_dict()

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
    ) -> dict[str, Any]:
        """A node's neighbours at a version; filters keep an edge when one of its claims has
        at least ``min_confidence``, is ``writer``'s, or was asserted after / before a time
        (epoch milliseconds, exclusive)."""
        p = ctx.principal(request)
        n = node(node_)
        v = await at_of(p, at, timeout)
        ns = graph.neighbors(
            n,
            edge_type=edge_type,
            direction=direction,
            include_absent=include_absent,
            at=v,
            min_confidence=min_confidence,
            writer=writer,
            asserted_after=asserted_after,
            asserted_before=asserted_before,
        )
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
        """Every decision that touched an edge, up to a version."""
        p = ctx.principal(request)
        s, o = node(subject), node(object)
        v = await at_of(p, at, timeout)
        return {"version": v, "history": graph.history(edge_type, s, o, at=v)}

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
        v = await at_of(p, at, timeout)
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
        v = await at_of(p, at, 0.0)
        return {"version": v, "escalations": graph.escalations(at=v, include_open=include_open)}

    @r.get("/v1/escalations/{conflict_id}")
    async def get_escalation(request: Request, conflict_id: str, at: AtQuery = None) -> Any:
        """One conflict's self-contained escalation payload, at a version."""
        p = ctx.principal(request)
        v = await at_of(p, at, 0.0)
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
        v = await at_of(p, at, 0.0)
        record = graph.calibration(edge_type, at=v)
        return {"version": v, "edge_type": edge_type, "record": record}

    @r.get("/v1/claims/{claim_id}")
    async def get_claim(request: Request, claim_id: str, at: AtQuery = None) -> Any:
        """A claim's record and status at a version."""
        p = ctx.principal(request)
        v = await at_of(p, at, 0.0)
        info = graph.claim_info(claim_id, at=v)
        if info is None:
            raise NotFoundError(f"no claim {claim_id[:80]!r} at version {v}")
        return info

    @r.get("/v1/conflicts/{conflict_id}")
    async def get_conflict(request: Request, conflict_id: str, at: AtQuery = None) -> Any:
        """A conflict at a version, with its claims' full evidence."""
        p = ctx.principal(request)
        v = await at_of(p, at, 0.0)
        c = graph.conflict(conflict_id, at=v)
        if c is None:
            raise NotFoundError(f"no conflict {conflict_id[:80]!r} at version {v}")
        return with_claims(c, v)

    @r.get("/v1/schema")
    async def get_schema(request: Request, at: AtQuery = None) -> Any:
        """The graph schema in force at a version."""
        p = ctx.principal(request)
        v = await at_of(p, at, 0.0)
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
        v = await at_of(p, at, 0.0)
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
