"""MCP over stdio (``claimgraph mcp``) and over streamable HTTP at ``/mcp`` (``claimgraph serve``).

**stdio** serves one session: one process, one identity fixed when it starts, one run at a
time. **HTTP** serves many: each request must carry a bearer token (401 otherwise); a session
is (the token's agent, the ``Mcp-Session-Id`` the SDK assigns), and it ends — with its run —
when the client deletes the session, or after a whole lease unused (its pin has lapsed by
then). Identity comes only from the token.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.fastmcp import Context
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from claimgraph.errors import AuthError
from claimgraph.mcp.server import build_server
from claimgraph.mcp.session import AgentSession, Identity
from claimgraph.service.port import GraphPort

__all__ = ["HttpSessions", "mount", "serve_stdio"]

Identify = Callable[[str | None], Identity | None]


def serve_stdio(session: AgentSession) -> None:
    """Serve one session's tools over stdin/stdout until the host closes them."""
    server = build_server(lambda ctx: session)
    try:
        server.run("stdio")
    finally:
        session.close()


def _bearer(headers: Any) -> str | None:
    scheme, _, token = str(headers.get("authorization", "")).partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class HttpSessions:
    """The HTTP transport's sessions: (agent, MCP session id) → :class:`AgentSession`."""

    def __init__(self, graph: GraphPort, identify: Identify, lease: float = 900.0) -> None:
        self.graph = graph
        self.identify = identify
        self.lease = lease
        self._sessions: dict[tuple[str, str], AgentSession] = {}
        self._used: dict[tuple[str, str], float] = {}
        self._swept = time.monotonic()
        self._lock = threading.Lock()

    def of(self, ctx: Context[Any, Any, Any]) -> AgentSession:
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        ident = self.identify(_bearer(headers))
        if ident is None:  # the ASGI guard let nothing through without a token: belt and braces
            raise AuthError("unauthenticated", "a valid bearer token is needed", 401)
        key = (ident.agent, str(headers.get("mcp-session-id", "")))
        now = time.monotonic()
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                s = AgentSession(self.graph, ident, task=ident.default_task, lease=self.lease)
                self._sessions[key] = s
            self._used[key] = now
            idle = self._idle(now)
        for old in idle:  # their pins have lapsed: end their runs
            old.close()
        return s

    def _idle(self, now: float) -> list[AgentSession]:
        """Sessions unused for a whole lease (a client that vanished), at most once a minute."""
        if now - self._swept < 60.0:
            return []
        self._swept = now
        gone = [k for k, t in self._used.items() if now - t > self.lease]
        for k in gone:
            self._used.pop(k, None)
        return [s for k in gone if (s := self._sessions.pop(k, None)) is not None]

    def end(self, agent: str, session_id: str) -> None:
        with self._lock:
            s = self._sessions.pop((agent, session_id), None)
            self._used.pop((agent, session_id), None)
        if s is not None:
            s.close()

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            s.close()

    def live(self) -> list[AgentSession]:
        with self._lock:
            return list(self._sessions.values())


class _Guard:
    """ASGI: no valid bearer token → 401 problem+json; a DELETE ends the session's run."""

    def __init__(self, app: ASGIApp, sessions: HttpSessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        ident = self.sessions.identify(_bearer(headers))
        if ident is None:
            body = json.dumps(
                {
                    "type": "about:blank",
                    "title": "Unauthorized",
                    "status": 401,
                    "reason": "unauthenticated",
                    "detail": "MCP over HTTP needs Authorization: Bearer TOKEN",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/problem+json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
        if scope.get("method") == "DELETE" and headers.get("mcp-session-id"):
            self.sessions.end(ident.agent, headers["mcp-session-id"])


def mount(
    app: Any, graph: GraphPort, identify: Identify, *, host: str = "127.0.0.1"
) -> HttpSessions:
    """Serve MCP's streamable HTTP transport at ``/mcp`` on ``app`` (a FastAPI app).

    The MCP session manager runs inside the app's lifespan (started and stopped with it).
    """
    sessions = HttpSessions(graph, identify)
    local = host in ("127.0.0.1", "localhost", "::1")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=local,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"] if local else [],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"] if local else [],
    )
    server = build_server(sessions.of, transport_security=security)
    server.streamable_http_app()  # creates the session manager
    endpoint = _Guard(StreamableHTTPASGIApp(server.session_manager), sessions)
    app.router.routes.append(Route("/mcp", endpoint=endpoint))
    before = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with server.session_manager.run(), before(a) as state:
            try:
                yield state
            finally:
                sessions.close()

    app.router.lifespan_context = lifespan
    return sessions
