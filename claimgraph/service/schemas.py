"""Graph schemas on disk and in force at a version (the parser itself is pure:
:mod:`claimgraph.core.schema`)."""

from __future__ import annotations

import functools
from typing import Any

from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import LIMITS
from claimgraph.core.schema.parse import parse_schema
from claimgraph.core.schema.types import GraphSchema
from claimgraph.errors import SchemaError

__all__ = ["load_schema_file", "schema_at"]


def load_schema_file(path: str) -> GraphSchema:
    """Read and validate a schema file (errors name the file) with the checks a
    ``publish_schema`` decision makes: its size, then the parser's every problem, so
    ``schema check`` accepts exactly what publishing it would accept."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(LIMITS["document"] + 1)  # no more than a publish would take
    except OSError as exc:
        raise SchemaError(path, [("", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise SchemaError(path, [("", "not UTF-8 text")]) from None
    if len(text) > LIMITS["document"]:  # as the governor refuses it (field_too_large)
        raise SchemaError(
            path, [("", f"schema document is larger than {LIMITS['document']} characters")]
        )
    return parse_schema(text, source=path, rules=CURRENT)  # checked as a publish would be


@functools.lru_cache(maxsize=8)
def _parsed(document: str, source: str) -> GraphSchema:
    return parse_schema(document, source)


def schema_at(graph: Any, version: int) -> GraphSchema | None:
    """The schema in force at ``version``, through the graph port (``schema_info``), so any
    handle — embedded, Kafka or the HTTP SDK — has it; each document is parsed once."""
    row = graph.schema_info(at=version)
    if row is None:
        return None
    return _parsed(str(row["document"]), str(row.get("source", "")))
