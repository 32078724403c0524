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
pins a version for an agent's run and records what it read.
"""

from __future__ import annotations

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
    from claimgraph.sdk.http import HttpGraph


def connect(url: str, token: str | None = None, **kw: _Any) -> HttpGraph:
    """The graph behind a claimgraph HTTP API (needs the ``http`` extra: httpx).

    ``connect("http://127.0.0.1:8080", token=...)`` has the embedded graph's interface;
    ``app=`` drives an ASGI app in process instead of the network.
    """
    from claimgraph.sdk.http import connect as _connect

    return _connect(url, token, **kw)


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
    "connect",
    "load_schema_file",
    "open",
    "open_replica",
    "parse_schema",
]
