"""Security headers on every response: CSP, framing, MIME sniffing, referrer.

The review page is plain HTML with its script and style in files of their own, so its policy
allows scripts, styles, images and requests from the server itself only — no inline script or
style attribute, no ``eval``, no other origin — and no page may frame it (``frame-ancestors``
and ``X-Frame-Options``). FastAPI's ``/docs`` and ``/redoc`` load Swagger UI / ReDoc from a
CDN with inline bootstrap code; they get a policy that allows exactly that and nothing else.
A header a route set itself is left alone.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "DOCS_CSP", "SecurityHeaders"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
    "https://cdn.redoc.ly; connect-src 'self'; worker-src blob:; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_DOCS = ("/docs", "/docs/oauth2-redirect", "/redoc")


def _extra(csp: str) -> tuple[tuple[bytes, bytes], ...]:
    return (
        (b"content-security-policy", csp.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    )


# built once: every response of a server carries one of these two sets
_EXTRA, _DOCS_EXTRA = _extra(CSP), _extra(DOCS_CSP)
_NAMES = frozenset(k for k, _ in _EXTRA)


def _with(headers: list[tuple[bytes, bytes]], extra: tuple[tuple[bytes, bytes], ...]) -> None:
    """Add ``extra`` to ``headers`` in place, except any a route set itself."""
    if any(k.lower() in _NAMES for k, _ in headers):
        have = {k.lower() for k, _ in headers}
        headers.extend(x for x in extra if x[0] not in have)
    else:
        headers.extend(extra)


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _DOCS_EXTRA if scope["path"] in _DOCS else _EXTRA

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                _with(headers, extra)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
