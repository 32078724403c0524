"""The review page: plain HTML and JavaScript over the API (quarantine queue, graph slider),
and the drawing of a node's neighbourhood at a version (server-rendered SVG)."""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from claimgraph.core.model import LIMITS
from claimgraph.http.bodies import PROBLEM_RESPONSES, AtQuery
from claimgraph.http.context import Context, browsable
from claimgraph.http.problems import problem
from claimgraph.http.svg import Edge, neighborhood_svg
from claimgraph.service.api import node

__all__ = ["router"]

_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}


def router(ctx: Context) -> APIRouter:
    """The page and its assets (no token needed: the page asks for one), and the drawing."""
    r = APIRouter()
    static = resources.files("claimgraph.http") / "review"

    @r.get("/", include_in_schema=False)
    def index() -> Response:
        return Response(status_code=307, headers={"Location": "/review"})

    @r.get("/review", include_in_schema=False)
    def review() -> HTMLResponse:
        return HTMLResponse((static / "index.html").read_text(encoding="utf-8"))

    @r.get("/review/{graph_name}/conflicts/{conflict_id}", include_in_schema=False)
    def review_conflict(graph_name: str, conflict_id: str) -> HTMLResponse:
        return review()  # the escalation payloads link here; the page focuses the conflict

    @r.get("/review/{name}", include_in_schema=False)
    def review_asset(name: str) -> Response:
        if name not in _ASSETS:
            return problem("not_found", f"no asset {name[:80]!r}")
        return Response((static / name).read_text(encoding="utf-8"), media_type=_ASSETS[name])

    @r.get(
        "/v1/neighborhood.svg",
        tags=["reads"],
        responses={200: {"content": {"image/svg+xml": {}}}, **PROBLEM_RESPONSES},
        response_class=Response,
        operation_id="neighborhood_svg",
    )
    async def neighborhood(
        request: Request,
        node_: Annotated[str, Query(alias="node", min_length=1, max_length=LIMITS["id"])],
        at: AtQuery = None,
        max_nodes: Annotated[int, Query(ge=1, le=100)] = 24,
    ) -> Response:
        """A node's neighbourhood at a version, drawn as SVG: its edges out and in, unknown
        ones dashed; at most ``max_nodes`` neighbours, and it says when it left some out."""
        ctx.principal(request)
        n = node(node_)
        g = browsable(ctx.graph)
        v = ctx.graph.head() if at is None else at
        ctx.graph.wait_for(v, 0.0)  # above head: VersionNotYetAvailable, as every read
        edges = [
            Edge(x.edge_type, x.direction, x.node, x.state, x.conflict_id)
            for x in g.neighborhood(n, at=v)
        ]
        svg = neighborhood_svg(n, edges, v, max_nodes=max_nodes)
        return Response(svg, media_type="image/svg+xml")

    return r
