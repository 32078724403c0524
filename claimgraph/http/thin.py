"""A thin path for the plain ``GET /v1/edge``: the same answer without FastAPI's machinery.

Routing, dependency resolution and validation cost several times the read itself. This ASGI
layer sits inside the gate (body bounds, requests in flight per principal) and whatever
middleware wraps the app (metrics, logs), and answers only the plain request: a known bearer
token, the three parameters once each and within bounds, ``at`` as plain digits at or below
head (or absent), no ``timeout`` or ``run``, and an edge that is not unknown (a blocked read
is the service layer's to count). Everything else — a missing or unknown token, a bad or
repeated parameter, a version to wait for — goes on to the FastAPI route, which answers it
(and its errors) as always. Errors of the read itself are mapped by the same
:func:`~claimgraph.http.problems.error_problem` the app's handler uses. Tests hold the two
paths to identical bodies.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from claimgraph.core.commands import I64
from claimgraph.core.model import LIMITS
from claimgraph.errors import ClaimgraphError, UnknownSlotError
from claimgraph.http.context import Context
from claimgraph.http.observe import AUTHORIZED, _flat
from claimgraph.http.problems import error_problem, problem

__all__ = ["ThinReads"]

_ID = LIMITS["id"]
_PARAMS = frozenset({"edge_type", "subject", "object", "at"})
_HEADERS = (b"content-type", b"application/json")
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _query(raw: bytes) -> dict[str, str] | None:
    """The query's parameters, or None if any is unknown, repeated or not plain text."""
    out: dict[str, str] = {}
    for part in raw.decode("latin-1").split("&"):
        name, eq, value = part.partition("=")
        if name not in _PARAMS or not eq or name in out:
            return None
        try:
            out[name] = unquote_plus(value, errors="strict")
        except UnicodeDecodeError:
            return None
    return out


def _node(value: str) -> tuple[str, str] | None:
    t, sep, i = value.partition(":")
    return (t, i) if sep and t and i else None


class ThinReads:
    """ASGI layer: answer a plain ``GET /v1/edge`` directly; pass everything else on."""

    def __init__(self, app: ASGIApp, context: Context, stats: dict[str, int]) -> None:
        self.app = app
        self.ctx = context
        self.stats = stats  # "answered": requests this path answered (app.state.thin)
        self._edge_route: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/edge" and scope["method"] == "GET":
            try:
                body = self._edge(scope)
            except ClaimgraphError as exc:
                await error_problem(exc)(scope, receive, send)
                return
            except Exception as exc:  # a bug: problem+json, as the app's handler answers it
                await problem("internal", f"{type(exc).__name__}: {exc}"[:500])(
                    scope, receive, send
                )
                return
            if body is not None:
                self.stats["answered"] += 1
                scope["route"] = self._route(scope)  # for the request log and metrics
                headers = [_HEADERS, (b"content-length", b"%d" % len(body))]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def _route(self, scope: Scope) -> Any:
        """The route ``GET /v1/edge`` would have taken (found once), as routing sets it."""
        if self._edge_route is None:
            app = scope.get("app")
            for r in _flat(getattr(app, "routes", ())):
                if r.matches(scope)[0] is Match.FULL:
                    self._edge_route = r
                    break
        return self._edge_route

    def _edge(self, scope: Scope) -> bytes | None:
        ctx = self.ctx
        token = None
        value = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, rest = value.decode("latin-1").partition(" ")
                token = rest.strip() if scheme.lower() == "bearer" and rest.strip() else None
                break
        if token is None:
            return None
        seen = scope.get(AUTHORIZED)  # the gate's lookup of this same header, if it made one
        p = seen[1] if seen is not None and seen[0] == value else ctx.access.lookup(token)
        if p is None:
            return None
        q = _query(scope["query_string"])
        if q is None or len(q) < 3 or "edge_type" not in q:
            return None
        et = q["edge_type"]
        s, o = _node(q.get("subject", "")), _node(q.get("object", ""))
        if s is None or o is None or not 0 < len(et) <= _ID:
            return None
        if len(q["subject"]) > _ID or len(q["object"]) > _ID:
            return None
        graph = ctx.graph
        raw_at = q.get("at")
        at: int | None = None  # the head, read once by the read itself
        if raw_at is not None:
            digits = raw_at[1:] if raw_at.startswith("-") else raw_at
            if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
                return None
            if len(digits) > 1 and digits[0] == "0":
                return None  # leading zeros: the route's parser decides
            at = int(raw_at)
            if not -1 <= at <= min(graph.head(), I64):
                return None  # a version to wait for, or out of range: the route answers
        try:
            e = graph.edge(et, s, o, at=at)
        except UnknownSlotError:
            return None  # a halted read is a blocked read too
        if e.state == "unknown":
            return None  # a blocked read: the route counts it (the service layer's rule)
        view: Any = e.as_dict()
        return _ENCODE(view).encode("utf-8")
