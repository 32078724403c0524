"""claimgraph: a governed, event-sourced knowledge graph for multi-agent systems.

Every edge is a *claim* an agent makes; a deterministic governor decides each command
exactly once; the offset of a decision in the decisions log is the graph *version*; every
read takes ``at=``. Start with::

    import claimgraph
    with claimgraph.open("./claimgraph-data", create=True) as g:
        g.publish_schema(open("schema.yaml").read(), agent="admin")
        r = g.assert_("deployment_target", "service:checkout", "environment:prod",
                      agent="release-agent", task="promote-release")
        g.edge("deployment_target", "service:checkout", "environment:prod", at=r.version)

Over HTTP, ``claimgraph.connect(url, token=...)`` gives the same interface; ``g.run(...)``
pins a version for an agent's run and records what it read. From asyncio,
``await claimgraph.aopen(path)`` and ``await claimgraph.aconnect(url, token=...)`` give it
with every call awaited.
"""

from __future__ import annotations

from pathlib import Path as _Path
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from claimgraph.core.model import (
    Cardinality,
    ConflictPolicy,
    Decision,
    DecisionKind,
    OnStale,
    OnUnknown,
    Polarity,
    Reason,
)
from claimgraph.core.schema import GraphSchema, parse_schema
from claimgraph.errors import (
    ArbiterError,
    AuthError,
    ClaimgraphError,
    ConfigError,
    CorruptionError,
    DecodeError,
    DiskFullError,
    FencedError,
    GovernorFenced,
    InputError,
    IntegrityError,
    LimitError,
    NotFoundError,
    ResolverError,
    RuleError,
    RunNotFound,
    SchemaError,
    StorageError,
    UnknownSlotError,
    VersionError,
    VersionNotYetAvailable,
    VersionPruned,
)
from claimgraph.projections.reader import EdgeView, NeighborView, SlotView
from claimgraph.projections.retention import Pin, PinRegistry
from claimgraph.service.graph import Graph, Receipt
from claimgraph.service.graph import open_graph as open
from claimgraph.service.replica import Replica, open_replica
from claimgraph.service.runs import Run, Snapshot
from claimgraph.service.schemas import load_schema_file
from claimgraph.service.signers import Signer
from claimgraph.service.traces import ReplayReport, RunSummary

if _TYPE_CHECKING:
    from claimgraph.sdk.aio import AsyncEmbeddedGraph
    from claimgraph.sdk.aio_http import AsyncHttpGraph
    from claimgraph.sdk.http import HttpGraph


def connect(url: str, token: str | None = None, **kw: _Any) -> HttpGraph:
    """The graph behind a claimgraph HTTP API (needs the ``http`` extra: httpx).

    ``connect("http://127.0.0.1:8080", token=...)`` has the embedded graph's interface;
    ``app=`` drives an ASGI app in process instead of the network.
    """
    from claimgraph.sdk.http import connect as _connect

    return _connect(url, token, **kw)


async def aopen(
    path: str | _Path, *, create: bool = False, graph: str | None = None
) -> AsyncEmbeddedGraph:
    """The embedded graph, async: ``g = await claimgraph.aopen(path)``; every call is awaited
    and its RocksDB work runs on the graph's own worker threads, never the event loop."""
    from claimgraph.sdk.aio import aopen as _aopen

    return await _aopen(path, create=create, graph=graph)


async def aconnect(
    url: str, token: str | None = None, *, app: _Any = None, timeout: float = 30.0
) -> AsyncHttpGraph:
    """The graph behind a claimgraph HTTP API, async (an ``httpx.AsyncClient``)."""
    from claimgraph.sdk.aio_http import aconnect as _aconnect

    return await _aconnect(url, token, app=app, timeout=timeout)


__version__ = "0.1.0"

__all__ = [
    "ArbiterError",
    "AuthError",
    "Cardinality",
    "ClaimgraphError",
    "ConfigError",
    "ConflictPolicy",
    "CorruptionError",
    "Decision",
    "DecisionKind",
    "DecodeError",
    "DiskFullError",
    "EdgeView",
    "FencedError",
    "GovernorFenced",
    "Graph",
    "GraphSchema",
    "InputError",
    "IntegrityError",
    "LimitError",
    "NeighborView",
    "NotFoundError",
    "OnStale",
    "OnUnknown",
    "Pin",
    "PinRegistry",
    "Polarity",
    "Reason",
    "Receipt",
    "ReplayReport",
    "Replica",
    "ResolverError",
    "RuleError",
    "Run",
    "RunNotFound",
    "RunSummary",
    "SchemaError",
    "Signer",
    "SlotView",
    "Snapshot",
    "StorageError",
    "UnknownSlotError",
    "VersionError",
    "VersionNotYetAvailable",
    "VersionPruned",
    "__version__",
    "aconnect",
    "aopen",
    "connect",
    "load_schema_file",
    "open",
    "open_replica",
    "parse_schema",
]
