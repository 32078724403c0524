"""The HTTP API: commands as authenticated principals, reads at any version, runs, review page.

:func:`create_app` wires a graph (anything that implements the graph port,
:class:`~claimgraph.service.port.GraphAPI`: the embedded graph or the Kafka-backed graph), a
:class:`~claimgraph.http.auth.TokenFile` and, for graphs that require signatures, the
ingress's :class:`~claimgraph.service.signers.Signer` into a FastAPI app. Every route is thin:
it checks the caller's token, calls the graph through the port, and maps our errors to
problem+json (:mod:`claimgraph.http.problems`). The routes live in one module per concern:
``commands`` (writes), ``reads``, ``runs``, ``review`` (the page); ``middleware`` bounds
each request before it reaches a route and maps errors; ``observe`` times and logs every
request and serves ``/metrics`` and ``/readyz``.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import FastAPI

from claimgraph import __version__
from claimgraph.http import catalogue, commands, middleware, observe, reads, review, runs
from claimgraph.http.answers import HealthAnswer, described
from claimgraph.http.auth import TokenFile
from claimgraph.http.context import Context
from claimgraph.http.headers import SecurityHeaders
from claimgraph.http.thin import ThinReads
from claimgraph.service.access import Access
from claimgraph.service.limits import DEFAULT_LIMITS, Limits
from claimgraph.service.port import GraphAPI
from claimgraph.service.signers import Signer

__all__ = ["create_app", "openapi_document"]


def create_app(
    graph: GraphAPI,
    tokens: TokenFile,
    *,
    signer: Signer | None = None,
    limits: Limits = DEFAULT_LIMITS,
    ready_lag: float = 1.0,
    request_log: observe.RequestLog | None = None,
    access: Access | None = None,
) -> FastAPI:
    """The HTTP API over ``graph`` (embedded or Kafka), authenticating with ``tokens``,
    within ``limits`` (what one request and one principal may cost; README: Limits).

    ``access`` is the graph's service layer when other surfaces share it (``serve``'s
    ``/mcp`` and writer socket); without one the app makes its own (``app.state.access``).

    ``/readyz`` answers 503 while the projection is more than ``ready_lag`` seconds behind
    the log; ``request_log`` gets one JSON-ready dict per request (:mod:`.observe`)."""
    app = FastAPI(
        title="claimgraph",
        version=__version__,
        description="A governed, event-sourced knowledge graph: every edge is a claim, "
        "every read is at a version. Authenticate with `Authorization: Bearer TOKEN`.",
    )
    if access is None:
        access = Access(graph, tokens.principal, limits=limits, signer=signer)
    ctx = Context(graph, tokens, signer, access.limits, access)
    app.state.access = access
    app.state.thin = {"answered": 0}  # plain GET /v1/edge answered by the thin path
    app.add_middleware(ThinReads, context=ctx, stats=app.state.thin)  # first: inside the gate
    middleware.install(app, access)
    observe.install(app, graph, ready_lag=ready_lag, log=request_log)  # outermost: sees all
    app.add_middleware(SecurityHeaders)  # outermost: every answer carries them
    app.state.context = ctx
    app.include_router(commands.router(ctx))
    app.include_router(reads.router(ctx))
    app.include_router(catalogue.router(ctx))
    app.include_router(runs.router(ctx))
    app.include_router(review.router(ctx))

    @app.get("/healthz", tags=["reads"], operation_id="healthz", **described(HealthAnswer))
    def healthz() -> dict[str, Any]:
        """Liveness: the graph's name (no token needed)."""
        return {"ok": True, "graph": graph.name}

    return app


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (independent of any graph or token)."""
    return create_app(cast(GraphAPI, None), TokenFile({})).openapi()
