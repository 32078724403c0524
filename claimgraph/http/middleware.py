"""What wraps every route: the ingress gate (body size, nesting, requests per principal) and
our errors and FastAPI's mapped to problem+json.

The gate is plain ASGI and runs before routing, before the body is parsed and before the
token is checked: a body whose ``Content-Length`` is over ``max_body`` is refused unread, a
chunked one as soon as it passes ``max_body`` (so at most ``max_body`` bytes of a request are
ever held), and a body nested deeper than ``max_depth`` before a parser recurses into it. A
principal (looked up from the bearer token; every caller without a valid token shares one
pool) may have ``max_requests`` requests in flight; one more is refused at once (429), so a
flood from one principal takes at most that many of the server's workers. ``GET /healthz``,
``/readyz`` and ``/metrics`` are not counted: probes answer even while the unauthenticated
pool is flooded.

Refusals at the gate are **not recorded** in the log: nothing was read that could be decided,
the caller is not yet authenticated, and recording them would let anyone grow the log at the
cost of one request each — the very cost the gate bounds. They are counted (:class:`Gate`).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from claimgraph.core.model import Reason
from claimgraph.errors import ClaimgraphError, LimitError
from claimgraph.http.observe import AUTHORIZED, PRINCIPAL
from claimgraph.http.problems import error_problem, problem
from claimgraph.logconf import events
from claimgraph.service.access import Access
from claimgraph.service.bounded import too_deep
from claimgraph.service.limits import Limits

__all__ = ["UNGATED", "Gate", "GateStats", "install"]

# probes and scrapes: answered before the gate counts them, so a flood cannot hide the server
UNGATED = frozenset({"/healthz", "/readyz", "/metrics"})


@dataclass(slots=True)
class GateStats:
    """What the gate refused, and the most bytes it ever read of a refused body."""

    too_large: int = 0
    too_deep: int = 0
    too_many: int = 0
    most_read_of_refused: int = 0


class Gate:
    """ASGI middleware: bound each request's body and each principal's requests in flight."""

    def __init__(self, app: ASGIApp, access: Access, limits: Limits, stats: GateStats) -> None:
        self.app = app
        self.access = access
        self.limits = limits
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            await problem(Reason.MALFORMED, "Content-Length is not a number of bytes", status=400)(
                scope, receive, send
            )
            return
        if declared is not None and int(declared) > self.limits.max_body:
            self.stats.too_large += 1
            await self._refuse(scope, send, self._too_large(declared.decode("latin-1")))
            return
        if scope["path"] in UNGATED and scope["method"] == "GET":
            await self.app(scope, receive, send)  # probes answer even through a flood
            return
        auth = headers.get(b"authorization", b"")
        scheme, _, token = auth.decode("latin-1").partition(" ")
        p = self.access.lookup(token.strip() if scheme.lower() == "bearer" else None)
        scope[PRINCIPAL] = p.agent if p is not None else None  # for the request log
        scope[AUTHORIZED] = (auth, p)  # the thin path does not look the same header up again
        # no Content-Length (or 0) and no Transfer-Encoding: HTTP/1.1 has no body to bound
        bodiless = (declared is None or declared == b"0") and b"transfer-encoding" not in headers
        try:
            with self.access.request(p):  # the service's count, the same for every surface
                if bodiless:
                    await self.app(scope, receive, send)
                    return
                body, more = await self._read(receive)
                if more:
                    self.stats.too_large += 1
                    self.stats.most_read_of_refused = max(
                        self.stats.most_read_of_refused, len(body)
                    )
                    await self._refuse(scope, send, self._too_large(f"more than {len(body)}"))
                    return
                if too_deep(body, self.limits.max_depth):
                    self.stats.too_deep += 1
                    await problem(
                        Reason.MALFORMED,
                        f"the body nests more than {self.limits.max_depth} deep",
                        limit="--max-depth",
                    )(scope, receive, send)
                    return
                await self.app(scope, _replay(body, receive), send)
        except LimitError as exc:  # too many requests in flight for this principal
            self.stats.too_many += 1
            await error_problem(exc)(scope, receive, send)

    async def _read(self, receive: Receive) -> tuple[bytes, bool]:
        """The body, up to ``max_body`` bytes; True as second item if there is more."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), False  # the client went away: the app sees it too
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body:
                return b"".join(chunks)[: self.limits.max_body], True
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), False

    def _too_large(self, size: str) -> LimitError:
        return LimitError(
            "too_large",
            "--max-body",
            f"the request body has {size} bytes; at most {self.limits.max_body}",
        )

    @staticmethod
    async def _refuse(scope: Scope, send: Send, exc: LimitError) -> None:
        """Answer 413 and close the connection (the rest of the body is never read)."""
        resp = error_problem(exc)
        resp.headers["connection"] = "close"

        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        await resp(scope, nothing, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the real channel."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


_log = events("http")


class Bugs:
    """A bug (an exception that is not one of ours) answers problem+json 500 and keeps the
    client's connection.

    Starlette's outermost middleware answers an unhandled exception with the app's handler
    and then re-raises it, and uvicorn then closes the keep-alive connection under the client.
    Caught here, inside it, the exception is logged once (with its traceback) and answered;
    the body says that a write may have been decided, so a client looks its command up by id
    (or retries with the same ``command_id``, which the governor rejects as a duplicate if it
    was decided) instead of guessing.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:  # the edge: every bug of the app ends here, answered
            if started:
                raise  # too late to answer: the response is on its way
            _log.error(
                "http.bug",
                route=scope.get("path", "")[:200],
                method=scope.get("method", ""),
                error=f"{type(exc).__name__}: {exc}"[:500],
                traceback="".join(traceback.format_exception(exc))[-4000:],
            )
            writes = scope.get("method") == "POST"
            detail = f"{type(exc).__name__}: {exc}"[:300] + (
                "; the command may have been decided: read it back by its command_id, or "
                "retry with the same command_id (a decided one is rejected as a duplicate)"
                if writes
                else ""
            )
            await problem("internal", detail)(scope, receive, send)


def install(app: FastAPI, access: Access) -> None:
    """The gate in front of every route, and every error a route can raise as a problem.

    ``app.state.requests`` (requests in flight per principal: the service layer's count) and
    ``app.state.gate`` (what the gate refused) are there for operators and tests to look at.
    """
    app.state.requests = access.requests
    app.state.gate = GateStats()
    app.add_middleware(Gate, access=access, limits=access.limits, stats=app.state.gate)

    @app.exception_handler(ClaimgraphError)
    async def ours(request: Request, exc: ClaimgraphError) -> JSONResponse:
        return error_problem(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return problem(
            Reason.INVALID_FIELD,
            f"{where}: {first.get('msg', 'invalid')}"[:500],
            errors=[{"loc": [str(x) for x in e.get("loc", ())], "msg": e["msg"]} for e in errs],
        )

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not one of our errors: still problem+json, never a plain-text 500 (only a
        # bug outside Bugs' reach comes here: Starlette then re-raises and the connection goes)
        return problem("internal", f"{type(exc).__name__}: {exc}"[:500])

    app.add_middleware(Bugs)  # outside the gate: a bug anywhere in it answers, and keeps

    @app.exception_handler(StarletteHTTPException)
    async def http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "malformed")
        return problem(reason, str(exc.detail), status=exc.status_code)
