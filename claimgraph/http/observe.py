"""What an operator sees of the HTTP API: ``/metrics``, ``/readyz`` and one log event per
request (``http.request`` of ``claimgraph.http``).

:class:`Observe` is plain ASGI and wraps everything else (the gate included), so a request the
gate refuses is timed and logged too. Its labels are bounded whatever a caller sends: the
route is the *template* the request matched (``/v1/edges/{edge_type}/{subject}/{obj}``,
``unmatched`` for any other path), the method one of the HTTP methods or ``other``, the status
a number. The request log names the principal (the agent of the bearer token, never the
token) and never the raw path or query.

Metrics (Prometheus text at ``GET /metrics``; README: Observability):

* ``claimgraph_http_request_duration_seconds{route,method,status}`` — a histogram;
* ``claimgraph_http_requests_in_flight``;
* ``claimgraph_http_decisions_total{kind}`` — decisions of the commands this server wrote
  (HTTP, MCP and the ticker);
* ``claimgraph_internal_errors_total`` — of those, the ones a rule failed on (a bug);
* ``claimgraph_applied_version{graph}``, ``claimgraph_projection_lag_seconds{graph}`` (the
  age of the oldest decision not applied yet), ``claimgraph_open_quarantines{graph}`` — read
  from the graph at each scrape;
* ``process_*`` — CPU, memory, open files of the server process.

``GET /readyz`` answers 200 while the projection is within ``ready_lag`` seconds of the log
head, else 503 (both with the lag as JSON).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from claimgraph.errors import ClaimgraphError
from claimgraph.http.answers import ReadyAnswer
from claimgraph.logconf import Event, json_handler
from claimgraph.service.api import Receipt
from claimgraph.service.lag import Lagging
from claimgraph.service.port import GraphAPI

__all__ = [
    "HttpMetrics",
    "Observe",
    "RequestEvents",
    "RequestLog",
    "install",
    "request_fields",
    "request_logger",
    "route_of",
]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PRINCIPAL = "claimgraph.principal"  # the gate puts the caller's agent in the scope under it
AUTHORIZED = "claimgraph.authorized"  # ... and (the Authorization header, its principal)


class HttpMetrics:
    """The HTTP API's metrics, in a registry of their own (one per app)."""

    def __init__(self, graph: GraphAPI | None) -> None:
        self.registry = CollectorRegistry()
        self.duration = Histogram(
            "claimgraph_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by route template",
            ["route", "method", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "claimgraph_http_requests_in_flight", "Requests being served", registry=self.registry
        )
        # counted by Observe on the event loop's thread (no lock) and read at each scrape
        self.serving = 0
        self.in_flight.set_function(lambda: self.serving)
        # one child per (route, method, status): ``labels()`` takes a lock and builds a key
        self._children: dict[tuple[str, str, int], Any] = {}
        self.decisions = Counter(
            "claimgraph_http_decisions",
            "Decisions of the commands this server wrote, by kind",
            ["kind"],
            registry=self.registry,
        )
        self.internal_errors = Counter(
            "claimgraph_internal_errors",
            "Commands this server wrote that a rule failed on: rejected internal_error (a bug)",
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        if graph is not None:
            self.registry.register(_GraphCollector(graph))

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Time one request under its route template, method and status."""
        child = self._children.get((route, method, status))
        if child is None:
            child = self._children[(route, method, status)] = self.duration.labels(
                route, method, str(status)
            )
        child.observe(seconds)

    def decided(self, receipts: Iterable[Receipt]) -> None:
        for r in receipts:
            self.decisions.labels(kind=r.kind).inc()
            if r.reason == "internal_error":
                self.internal_errors.inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _GraphCollector(Collector):
    """Gauges read from the graph when scraped: applied version, projection lag, quarantines."""

    def __init__(self, graph: GraphAPI) -> None:
        self.graph = graph

    def collect(self) -> Iterable[GaugeMetricFamily]:
        g = self.graph
        applied = GaugeMetricFamily(
            "claimgraph_applied_version", "The projection's applied version", labels=["graph"]
        )
        lag = GaugeMetricFamily(
            "claimgraph_projection_lag_seconds",
            "Age of the oldest committed decision the projection has not applied (0: caught up)",
            labels=["graph"],
        )
        open_q = GaugeMetricFamily(
            "claimgraph_open_quarantines", "Open conflicts at the head", labels=["graph"]
        )
        up = GaugeMetricFamily(
            "claimgraph_graph_up",
            "1 if this scrape could read the graph; 0: the gauges above are missing from it",
            labels=["graph"],
        )
        try:
            if isinstance(g, Lagging):
                pl = g.projection_lag()
                applied.add_metric([g.name], pl.applied)
                lag.add_metric([g.name], pl.seconds)
            else:
                applied.add_metric([g.name], g.head())
            open_q.add_metric([g.name], len(g.quarantine()))
        except ClaimgraphError:  # the store or broker is away: say so, not a stale number
            up.add_metric([g.name], 0)
            return [up]
        up.add_metric([g.name], 1)
        return [applied, lag, open_q, up]


def route_of(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route a request matched (or would match), else ``unmatched``."""
    route = scope.get("route")
    if route is None:  # refused before routing (the gate): find what it would have matched
        for r in _flat(routes):
            if r.matches(scope)[0] is Match.FULL:
                route = r
                break
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def _flat(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes, those of included routers one by one (FastAPI includes them lazily)."""
    for r in routes:
        inner = getattr(r, "effective_route_contexts", None)
        if inner is None:
            yield r
        else:
            yield from (c.original_route for c in inner())


RequestLog = Callable[[dict[str, Any]], None]


class RequestEvents:
    """The request log as ``http.request`` events of ``claimgraph.http`` (stdlib logging: the
    process's one format, level and handler decide what is written).

    :meth:`request` is the per-request path: it renders the fields as the JSON formatter
    would, from a template (the route and principal are JSON-encoded once each: both come
    from bounded sets, route templates and the token file's agents); when the process's
    JSON handler is the only one the record would reach (:func:`~claimgraph.logconf.
    json_handler`) it writes the line through it, else it hands the record to the logger
    without looking up its caller. ``self(line)`` logs a request log's dict.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("claimgraph.http")
        self._quoted: dict[str | None, str] = {}

    def __call__(self, line: dict[str, Any]) -> None:
        fields = {k: v for k, v in line.items() if k not in ("ts", "event")}
        self.logger.info(Event(line.get("event", "http.request"), fields))

    def _q(self, text: str | None) -> str:
        q = self._quoted.get(text)
        if q is None:
            q = json.dumps(text)
            if len(self._quoted) < 4096:
                self._quoted[text] = q
        return q

    def request(
        self, method: str, route: str, status: int, ms: float, principal: str | None
    ) -> None:
        """One request's event (method is one of METHODS or ``other``)."""
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        tail = (
            f', "method": "{method}", "route": {self._q(route)}, "status": {status}, '
            f'"duration_ms": {ms!r}, "principal": {self._q(principal)}}}'
        )
        handler = json_handler(logger)
        if handler is not None:  # only the process's JSON handler would see the record
            handler.write_event(logger.name, "http.request", tail)
            return
        fields = {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": ms,
            "principal": principal,
        }
        event = Event("http.request", fields, tail=tail)
        logger.handle(logging.LogRecord(logger.name, logging.INFO, "", 0, event, None, None))


def request_fields(
    ts: float, method: str, route: str, status: int, ms: float, principal: str | None
) -> dict[str, Any]:
    """The request log's line for one request."""
    return {
        "ts": ts,
        "event": "http.request",
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": ms,
        "principal": principal,
    }


def request_logger(logger: logging.Logger | None = None) -> RequestEvents:
    """The request log as events of ``claimgraph.http`` (or ``logger``)."""
    return RequestEvents(logger)


class Observe:
    """ASGI middleware: time, count and log every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: HttpMetrics,
        routes: Sequence[BaseRoute],
        log: RequestLog | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the server answers if the app raises before its response starts

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        metrics = self.metrics
        metrics.serving += 1
        try:
            await self.app(scope, receive, send_status)
        finally:
            metrics.serving -= 1
            seconds = time.perf_counter() - start
            method = scope["method"] if scope["method"] in METHODS else "other"
            route = route_of(scope, self.routes)
            metrics.observe(route, method, status, seconds)
            log = self.log
            if isinstance(log, RequestEvents):
                log.request(method, route, status, round(seconds * 1000, 3), scope.get(PRINCIPAL))
            elif log is not None:
                ms = round(seconds * 1000, 3)
                log(
                    request_fields(
                        round(time.time(), 3), method, route, status, ms, scope.get(PRINCIPAL)
                    )
                )


def install(
    app: FastAPI,
    graph: GraphAPI | None,
    *,
    ready_lag: float = 1.0,
    log: RequestLog | None = None,
) -> HttpMetrics:
    """Add ``/metrics`` and ``/readyz`` to ``app`` and wrap it in :class:`Observe`; count the
    decisions of every write ``graph`` makes from now on. ``app.state.metrics`` holds them."""
    metrics = HttpMetrics(graph)
    app.state.metrics = metrics
    app.add_middleware(Observe, metrics=metrics, routes=app.router.routes, log=log)
    if graph is not None:
        _count_decisions(graph, metrics)

    @app.get(
        "/metrics",
        tags=["reads"],
        response_class=Response,
        operation_id="metrics",
        responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
    )
    def prometheus_metrics() -> Response:
        """Prometheus metrics in the text exposition format (no token needed)."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get(
        "/readyz",
        tags=["reads"],
        operation_id="readyz",
        responses={
            200: {"model": ReadyAnswer},
            503: {"model": ReadyAnswer, "description": "Not ready: the projection lags"},
        },
    )
    def readyz() -> JSONResponse:
        """Readiness: 200 while the projection is within --ready-lag seconds of the log
        head, else 503 (no token needed)."""
        assert graph is not None
        if not isinstance(graph, Lagging):
            return JSONResponse({"ready": True, "graph": graph.name, "bound_seconds": ready_lag})
        try:
            pl = graph.projection_lag()
        except ClaimgraphError as exc:
            body = {"ready": False, "graph": graph.name, "error": str(exc)[:500]}
            return JSONResponse(body, status_code=503)
        ready = pl.seconds <= ready_lag
        body = {
            "ready": ready,
            "graph": graph.name,
            "applied": pl.applied,
            "lag_seconds": round(pl.seconds, 3),
            "bound_seconds": ready_lag,
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    return metrics


def _count_decisions(graph: GraphAPI, metrics: HttpMetrics) -> None:
    """Count the decision of every command ``graph`` submits (every write of the port, the
    ticker's and MCP's included, goes through ``submit``)."""
    submit = graph.submit

    def counted(commands: Sequence[Any]) -> list[Receipt]:
        receipts = submit(commands)
        metrics.decided(receipts)
        return receipts

    graph.submit = counted  # type: ignore[method-assign]
