"""The graph schema (policy): node types, edge types, writers and conflict policy (pure).

A schema is a YAML document published through the log by an admin, so every decision names
the revision that made it. :func:`parse_schema` validates a document completely and reports
every problem with its path inside the document and what was expected. The parts:
``types`` (the validated schema), ``checker`` (problem collection), ``policies`` (fallback,
merge, exits, decision checks, resolver chains and CEL rules) and ``parse`` (the document).
"""

from claimgraph.core.schema.parse import parse_schema
from claimgraph.core.schema.types import (
    DOMAIN_FALLBACKS,
    DecisionChecks,
    EdgeType,
    Exits,
    Fallback,
    GraphSchema,
    Pattern,
    ResolverSpec,
    Rule,
    Writer,
    duration_ms,
    fail_closed_warnings,
)

__all__ = [
    "DOMAIN_FALLBACKS",
    "DecisionChecks",
    "EdgeType",
    "Exits",
    "Fallback",
    "GraphSchema",
    "Pattern",
    "ResolverSpec",
    "Rule",
    "Writer",
    "duration_ms",
    "fail_closed_warnings",
    "parse_schema",
]
