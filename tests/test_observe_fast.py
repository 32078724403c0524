"""The request path's shortcuts say exactly what the long way says.

The request log's template renders the bytes ``json.dumps`` writes, the in-flight gauge counts
the scrape that reads it, a route's own security header is kept, and a thin read looks its
token up once (the gate's lookup is reused only for the very same header).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.http.auth import Principal, TokenFile
from claimgraph.http.headers import CSP, SecurityHeaders
from claimgraph.http.observe import RequestEvents
from claimgraph.logconf import Event, JsonFormatter
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


def _captured() -> tuple[RequestEvents, list[logging.LogRecord]]:
    """A request log whose records are kept (a logger of its own, not propagating)."""
    records: list[logging.LogRecord] = []
    logger = logging.getLogger(f"test.requests.{len(_LOGGERS)}")
    _LOGGERS.append(logger)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    return RequestEvents(logger), records


_LOGGERS: list[logging.Logger] = []


@pytest.mark.parametrize(
    "principal",
    [None, "inventory", 'qu"ote\\back', "ü-agent", "tab\tand\u2028line", "\x00"],
)
@pytest.mark.parametrize("route", ["/v1/edge", "unmatched", "/v1/edges/{edge_type}/{s}/{o}"])
def test_request_line_template_is_json_dumps(principal: str | None, route: str) -> None:
    """``RequestEvents.request`` renders, byte for byte, the JSON line the formatter writes
    for the same event without the template, which is ``json.dumps`` of the whole object."""
    fmt = JsonFormatter()
    for ms, status, method in (
        (0.042, 200, "GET"),
        (12345.678, 503, "other"),
        (0.0, 401, "DELETE"),
    ):
        log, records = _captured()
        log.request(method, route, status, ms, principal)
        (fast,) = records
        assert isinstance(fast.msg, Event) and fast.msg.tail is not None
        slow = logging.LogRecord(
            fast.name, logging.INFO, "", 0, Event("http.request", fast.msg.fields), (), None
        )
        slow.created = fast.created
        line = fmt.format(fast)
        assert line == fmt.format(slow)
        whole = {
            "ts": round(fast.created, 3),
            "level": "info",
            "logger": fast.name,
            "event": "http.request",
        }
        whole |= {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": ms,
            "principal": principal,
        }
        assert line == json.dumps(whole)
        assert "\n" not in line and json.loads(line)["principal"] == principal


def test_served_log_lines_parse_and_in_flight_counts_the_scrape(tmp_path: Path) -> None:
    """Through the app: one event per request from the default logger, and the
    in-flight gauge reads 1 while /metrics (itself a request) is being served, 0 after."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    g.assert_("depends_on", "service:a", "service:b", agent="inventory")
    log, records = _captured()
    app = create_app(g, token_file(), request_log=log)
    headers = {"Authorization": f"Bearer {TOKENS['tracer']}"}
    q = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}

    async def go() -> None:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
        ) as cl:
            assert (await cl.get("/v1/edge", params=q)).status_code == 200
            assert (await cl.get("/v1/head", headers={"Authorization": "x"})).status_code == 401
            text = (await cl.get("/metrics")).text
            assert "claimgraph_http_requests_in_flight 1.0" in text
            assert app.state.metrics.serving == 0

    anyio.run(go)
    lines = [json.loads(JsonFormatter().format(r)) for r in records]
    assert [(x["route"], x["status"], x["principal"]) for x in lines] == [
        ("/v1/edge", 200, "tracer"),
        ("/v1/head", 401, None),
        ("/metrics", 200, None),
    ]
    assert app.state.thin["answered"] == 1


def test_a_route_s_own_security_header_is_kept() -> None:
    """A response that sets its own CSP keeps it and gets the other headers once each."""

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"Content-Security-Policy", b"default-src 'self'")],
            }
        )
        await send({"type": "http.response.body", "body": b"x"})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def go() -> None:
        scope = {"type": "http", "path": "/", "method": "GET", "headers": []}
        await SecurityHeaders(inner)(scope, receive, send)
        await SecurityHeaders(inner)({**scope, "path": "/docs"}, receive, send)

    anyio.run(go)
    for start in (sent[0], sent[2]):
        names = [k.lower() for k, _ in start["headers"]]
        assert sorted(names) == sorted(set(names))
        assert dict(start["headers"])[b"Content-Security-Policy"] == b"default-src 'self'"
        assert dict(start["headers"])[b"x-frame-options"] == b"DENY"
    plain = [(b"a", b"1")]
    sent.clear()

    async def bare(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": plain})

    anyio.run(lambda: SecurityHeaders(bare)({"type": "http", "path": "/"}, receive, send))
    assert dict(sent[0]["headers"])[b"content-security-policy"] == CSP.encode()
    assert plain == [(b"a", b"1")], "the route's own header list is not changed"


class CountingTokens(TokenFile):
    """A token file that counts its lookups."""

    def __init__(self, inner: TokenFile) -> None:
        super().__init__(inner._by_digest)
        self.lookups = 0

    def principal(self, token: str | None) -> Principal | None:
        self.lookups += 1
        return super().principal(token)


def test_thin_reads_look_the_token_up_once(tmp_path: Path) -> None:
    """A thin read costs one token lookup (the gate's); with two different Authorization
    headers the thin path looks its own (the first) up, as the route would."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    g.assert_("depends_on", "service:a", "service:b", agent="inventory")
    tokens = CountingTokens(token_file())
    app = create_app(g, tokens)
    q = "/v1/edge?edge_type=depends_on&subject=service:a&object=service:b"
    good = (b"authorization", f"Bearer {TOKENS['tracer']}".encode())

    async def call(headers: list[tuple[bytes, bytes]]) -> tuple[int, Any]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as cl:
            r = await cl.send(httpx.Request("GET", "http://t" + q, headers=headers))
            return r.status_code, r.json()

    async def go() -> None:
        status, body = await call([good])
        assert (status, body["state"]) == (200, "present")
        assert (tokens.lookups, app.state.thin["answered"]) == (1, 1)
        tokens.lookups = 0
        status, _ = await call([good, (b"authorization", b"Bearer nope")])
        assert status == 200 and tokens.lookups == 2  # the gate took the last, thin the first
        assert app.state.thin["answered"] == 2

    anyio.run(go)


DIRECT = """
import io, logging, sys, time
from claimgraph.http.observe import RequestEvents
from claimgraph.logconf import configure, json_handler
err = sys.stderr = io.StringIO()
handler = configure("info", "json", 10)
time.time = lambda: 1764590000.1234
log = RequestEvents()
paths = []
for principal in (None, 'qu"ote', "ü-agent"):
    logging.getLogger("claimgraph.http").filters.clear()
    paths.append(json_handler(log.logger) is handler)
    log.request("GET", "/v1/edges/{edge_type}/{s}/{o}", 200, 0.042, principal)
    logging.getLogger("claimgraph.http").addFilter(lambda r: True)  # now the record's way
    paths.append(json_handler(log.logger) is handler)
    log.request("GET", "/v1/edges/{edge_type}/{s}/{o}", 200, 0.042, principal)
print(paths)
print(err.getvalue(), end="", file=sys.__stdout__)
"""


def test_the_direct_request_line_is_the_handler_s_line() -> None:
    """With only the process's JSON handler to see it, a request's line is written straight
    through that handler; the bytes are those the record would have given (a filter on the
    way sends it the long way)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    r = subprocess.run(
        [sys.executable, "-c", DIRECT], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0, r.stderr
    paths, *lines = r.stdout.splitlines()
    assert paths == str([True, False] * 3)
    assert len(lines) == 6 and all(lines[i] == lines[i + 1] for i in (0, 2, 4)), lines
    assert (
        json.loads(lines[4])["principal"] == "ü-agent"
        and json.loads(lines[0])["ts"] == 1764590000.123
    )
