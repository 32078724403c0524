"""The review page: plain HTML and JavaScript over the API (quarantine queue, graph slider)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from claimgraph.http.problems import problem

__all__ = ["router"]

_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}


def router() -> APIRouter:
    """The page and its assets (no token needed: the page asks for one)."""
    r = APIRouter(include_in_schema=False)
    static = resources.files("claimgraph.http") / "review"

    @r.get("/")
    def index() -> Response:
        return Response(status_code=307, headers={"Location": "/review"})

    @r.get("/review")
    def review() -> HTMLResponse:
        return HTMLResponse((static / "index.html").read_text(encoding="utf-8"))

    @r.get("/review/{graph_name}/conflicts/{conflict_id}")
    def review_conflict(graph_name: str, conflict_id: str) -> HTMLResponse:
        return review()  # the escalation payloads link here; the page focuses the conflict

    @r.get("/review/{name}")
    def review_asset(name: str) -> Response:
        if name not in _ASSETS:
            return problem("not_found", f"no asset {name[:80]!r}")
        return Response((static / name).read_text(encoding="utf-8"), media_type=_ASSETS[name])

    return r
