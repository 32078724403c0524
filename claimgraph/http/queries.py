"""Queries beyond one hop over HTTP: ``GET /v1/paths`` and ``GET /v1/reach`` at a version.

Bounded as :mod:`claimgraph.service.queries` documents (hops, results, expansions, time);
unknown edges met on the way come back in ``unknown`` with their conflict ids.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from claimgraph.core.model import LIMITS
from claimgraph.http.bodies import PROBLEM_RESPONSES, AtQuery, TimeoutQuery
from claimgraph.http.context import Context
from claimgraph.http.reads import RunQuery
from claimgraph.service.api import node
from claimgraph.service.queries import QUERY_LIMITS

__all__ = ["HopOut", "PathOut", "PathsOut", "ReachOut", "ReachedOut", "router"]


class HopOut(BaseModel):
    """One edge on a walk, as walked (``subject`` → ``object``, each ``[type, id]``)."""

    edge_type: str
    subject: list[str]
    object: list[str]
    state: Literal["present", "unknown"]
    conflict_id: str | None
    claims: list[str]


class PathOut(BaseModel):
    """A simple path: ``unknown`` if one of its hops is, naming those conflicts."""

    state: Literal["present", "unknown"]
    length: int
    conflicts: list[str]
    hops: list[HopOut]


class PathsOut(BaseModel):
    """Paths from ``src`` to ``dst`` at ``version``, shortest first."""

    src: list[str]
    dst: list[str]
    version: int
    max_hops: int
    paths: list[PathOut]
    unknown: list[HopOut]
    truncated: bool
    truncated_by: Literal["limit", "expansions"] | None


class ReachedOut(BaseModel):
    """A node reached: in how many hops; ``certain`` unless only through unknown edges."""

    node: list[str]
    hops: int
    certain: bool
    conflicts: list[str]


class ReachOut(BaseModel):
    """Nodes within ``max_hops`` of ``node`` at ``version``, nearest first."""

    node: list[str]
    direction: Literal["out", "in", "both"]
    version: int
    max_hops: int
    nodes: list[ReachedOut]
    unknown: list[HopOut]
    truncated: bool
    truncated_by: Literal["limit", "expansions"] | None


NodeQ = Annotated[str, Query(min_length=1, max_length=LIMITS["id"])]
Hops = Annotated[int, Query(ge=1, le=QUERY_LIMITS["max_hops"])]
Limit = Annotated[int, Query(ge=1, le=QUERY_LIMITS["limit"])]
Types = Annotated[
    list[Annotated[str, Field(max_length=LIMITS["id"])]] | None,
    Query(max_length=64, description="Follow only these edge types (repeat the parameter)."),
]


def router(ctx: Context) -> APIRouter:
    """The query routes over ``ctx.graph``."""
    r = APIRouter(tags=["reads"], responses=PROBLEM_RESPONSES)

    @r.get("/v1/paths")
    async def get_paths(
        request: Request,
        src: NodeQ,
        dst: NodeQ,
        max_hops: Hops = 3,
        edge_type: Types = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: Limit = 100,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        run: RunQuery = None,
    ) -> PathsOut:
        """Simple paths from ``src`` to ``dst`` at a version, shortest first; a path through
        a quarantined edge is ``unknown`` and names its conflicts."""
        scoped = ctx.scoped(request)
        s, d = node(src), node(dst)
        kw: Any = {
            "max_hops": max_hops, "edge_types": edge_type, "direction": direction, "limit": limit
        }  # fmt: skip
        res = await run_in_threadpool(
            lambda: scoped.within(
                run,
                lambda r: r.paths(s, d, **kw),
                lambda: scoped.paths(s, d, at=at, timeout=timeout, **kw),
            )
        )
        return PathsOut.model_validate(res.as_dict())

    @r.get("/v1/reach")
    async def get_reach(
        request: Request,
        node_: Annotated[str, Query(alias="node", min_length=1, max_length=LIMITS["id"])],
        direction: Literal["out", "in", "both"] = "out",
        max_hops: Hops = 2,
        edge_type: Types = None,
        limit: Limit = 100,
        at: AtQuery = None,
        timeout: TimeoutQuery = 0.0,
        run: RunQuery = None,
    ) -> ReachOut:
        """Every node within ``max_hops`` of ``node`` at a version, nearest first;
        ``certain: false`` when reached only through quarantined edges."""
        scoped = ctx.scoped(request)
        n = node(node_)
        kw: Any = {
            "direction": direction, "max_hops": max_hops, "edge_types": edge_type, "limit": limit
        }  # fmt: skip
        res = await run_in_threadpool(
            lambda: scoped.within(
                run,
                lambda r: r.reach(n, **kw),
                lambda: scoped.reach(n, at=at, timeout=timeout, **kw),
            )
        )
        return ReachOut.model_validate(res.as_dict())

    return r
