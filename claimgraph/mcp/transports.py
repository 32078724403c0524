"""MCP over stdio (``claimgraph mcp``) and over streamable HTTP at ``/mcp`` (``claimgraph serve``).

A transport authenticates and maps errors; the checks, limits and runs are the service
layer's (:class:`~claimgraph.service.access.Access`), shared with the HTTP API when ``serve``
mounts ``/mcp``.

**stdio** serves one session: one process, one identity fixed when it starts. **HTTP** serves
many: each request must carry a bearer token (401 otherwise); a session is (the token's
agent, the ``Mcp-Session-Id`` the SDK assigns) and belongs to the principal that opened it:
a request naming another principal's session — a tool call, its stream or its ``DELETE`` —
is answered 404, as for a session that does not exist, and never reaches it. A session ends
when its client deletes it, or after a whole lease unused; its runs do not end with it
(they are handles the principal may name from its next session).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.fastmcp import Context
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from claimgraph.errors import AuthError
from claimgraph.mcp.server import build_server
from claimgraph.mcp.session import AgentSession
from claimgraph.service.access import Access

__all__ = ["HttpSessions", "SessionCloseFilter", "mount", "serve_stdio"]


def serve_stdio(session: AgentSession) -> None:
    """Serve one session's tools over stdin/stdout until the host closes them; the runs the
    process holds end with it."""
    server = build_server(lambda ctx: session)
    try:
        server.run("stdio")
    finally:
        session.close()
        session.scoped.access.close()


def _bearer(headers: Any) -> str | None:
    scheme, _, token = str(headers.get("authorization", "")).partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class HttpSessions:
    """The HTTP transport's sessions: (agent, MCP session id) → :class:`AgentSession`, and
    which principal opened each session id."""

    def __init__(self, access: Access, lease: float = 900.0) -> None:
        self.access = access
        self.graph = access.graph
        self.lease = lease
        self._sessions: dict[tuple[str, str], AgentSession] = {}
        self._used: dict[tuple[str, str], float] = {}
        self._owners: dict[str, str] = {}  # MCP session id → the agent that opened it
        self._swept = time.monotonic()
        self._lock = threading.Lock()

    def identify(self, token: str | None) -> Any:
        return self.access.lookup(token)

    def owner(self, session_id: str) -> str | None:
        with self._lock:
            return self._owners.get(session_id)

    def opened(self, session_id: str, agent: str) -> None:
        """The SDK assigned ``session_id`` to a session ``agent`` opened."""
        with self._lock:
            self._owners.setdefault(session_id, agent)

    def of(self, ctx: Context[Any, Any, Any]) -> AgentSession:
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        ident = self.access.lookup(_bearer(headers))
        if ident is None:  # the ASGI guard let nothing through without a token: belt and braces
            raise AuthError("unauthenticated", "a valid bearer token is needed", 401)
        key = (ident.agent, str(headers.get("mcp-session-id", "")))
        now = time.monotonic()
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                s = AgentSession(self.access.of(ident))
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
            self._owners.pop(k[1], None)
        return [s for k in gone if (s := self._sessions.pop(k, None)) is not None]

    def end(self, agent: str, session_id: str) -> None:
        with self._lock:
            s = self._sessions.pop((agent, session_id), None)
            self._used.pop((agent, session_id), None)
            if self._owners.get(session_id) == agent:
                del self._owners[session_id]
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


async def _problem(send: Send, status: int, reason: str, detail: str) -> None:
    body = json.dumps(
        {"type": "about:blank", "title": reason.replace("_", " "), "status": status,
         "reason": reason, "detail": detail}
    ).encode()  # fmt: skip
    headers = [(b"content-type", b"application/problem+json")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Guard:
    """ASGI: no valid bearer token → 401; a session id another principal opened → 404 (it
    never reaches that session); the session id the SDK assigns is remembered as the
    opener's; a DELETE by its owner ends the session."""

    def __init__(self, app: ASGIApp, sessions: HttpSessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        ident = self.sessions.identify(_bearer(headers))
        if ident is None:
            await _problem(
                send, 401, "unauthenticated", "MCP over HTTP needs Authorization: Bearer TOKEN"
            )
            return
        sid = headers.get("mcp-session-id")
        if sid:
            owner = self.sessions.owner(sid)
            if owner is not None and owner != ident.agent:
                await _problem(send, 404, "not_found", "no such MCP session (Mcp-Session-Id)")
                return
        sessions, agent = self.sessions, ident.agent

        deleting = scope.get("method") == "DELETE" and bool(sid)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and not sid:
                for k, v in message.get("headers", []):
                    if k.lower() == b"mcp-session-id":
                        sessions.opened(v.decode("latin-1"), agent)
            start = message["type"] == "http.response.start"
            if deleting and sid and start and message["status"] < 300:
                sessions.end(agent, sid)  # ended before the client is told it is
            await send(message)

        await self.app(scope, receive, sending)
        if scope.get("method") == "DELETE" and sid:
            self.sessions.end(ident.agent, sid)


class SessionCloseFilter(logging.Filter):
    """The one record of the SDK's streamable HTTP server that is not an error.

    mcp 1.x (to 1.30 at least) logs ``Error in standalone SSE writer`` at ERROR, with a
    ``ClosedResourceError`` traceback, each time a session that opened the standalone GET
    stream ends normally: the session's ``terminate()`` (the client's DELETE) closes the
    stream that writer is reading, and the writer reports its own stream's closing as a
    failure. This filter, on the SDK's logger, turns exactly that record (that message and a
    ``ClosedResourceError``: nothing else closes that stream's reading end) into a DEBUG
    line without the traceback; every other record of the SDK passes as it is.
    """

    MESSAGE = "Error in standalone SSE writer"

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.msg != self.MESSAGE or not isinstance(exc, anyio.ClosedResourceError):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg, record.args = "standalone SSE writer: its stream closed with the session", ()
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_SDK_LOGGER = "mcp.server.streamable_http"


def _filter_session_close() -> None:
    logger = logging.getLogger(_SDK_LOGGER)
    if not any(isinstance(f, SessionCloseFilter) for f in logger.filters):
        logger.addFilter(SessionCloseFilter())


def mount(app: Any, access: Access | None = None, *, host: str = "127.0.0.1") -> HttpSessions:
    """Serve MCP's streamable HTTP transport at ``/mcp`` on ``app`` (a FastAPI app from
    :func:`claimgraph.http.app.create_app`), through ``access`` — the app's own service layer
    unless given — so a principal's limits and runs are the same on both.

    The MCP session manager runs inside the app's lifespan (started and stopped with it).
    """
    _filter_session_close()
    sessions = HttpSessions(access if access is not None else app.state.access)
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
                sessions.access.close()

    app.router.lifespan_context = lifespan
    return sessions
