"""Graph schema files on disk (the parser itself is pure: :mod:`claimgraph.core.schema`)."""

from __future__ import annotations

from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.schema.parse import parse_schema
from claimgraph.core.schema.types import GraphSchema
from claimgraph.errors import SchemaError

__all__ = ["load_schema_file"]


def load_schema_file(path: str) -> GraphSchema:
    """Read and validate a schema file (errors name the file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SchemaError(path, [("", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise SchemaError(path, [("", "not UTF-8 text")]) from None
    return parse_schema(text, source=path, rules=CURRENT)  # checked as a publish would be
