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
"""

from __future__ import annotations

from .errors import (
    ClaimgraphError,
    ConfigError,
    DecodeError,
    InputError,
    IntegrityError,
    SchemaError,
    StorageError,
    UnknownSlotError,
    VersionError,
    VersionNotYetAvailable,
    VersionPruned,
)
from .graph import Graph, Receipt
from .graph import open_graph as open
from .model import (
    Cardinality,
    ConflictPolicy,
    Decision,
    DecisionKind,
    OnStale,
    OnUnknown,
    Polarity,
    Reason,
)
from .policy import GraphSchema, load_schema_file, parse_schema
from .projections.reader import EdgeView, NeighborView, SlotView
from .projections.replica import Replica, open_replica
from .retention import Pin, PinRegistry

__version__ = "0.1.0"

__all__ = [
    "Cardinality",
    "ClaimgraphError",
    "ConfigError",
    "ConflictPolicy",
    "Decision",
    "DecisionKind",
    "DecodeError",
    "EdgeView",
    "Graph",
    "GraphSchema",
    "InputError",
    "IntegrityError",
    "NeighborView",
    "OnStale",
    "OnUnknown",
    "Pin",
    "PinRegistry",
    "Polarity",
    "Reason",
    "Receipt",
    "Replica",
    "SchemaError",
    "SlotView",
    "StorageError",
    "UnknownSlotError",
    "VersionError",
    "VersionNotYetAvailable",
    "VersionPruned",
    "__version__",
    "load_schema_file",
    "open",
    "open_replica",
    "parse_schema",
]
