"""Graph schema files on disk (the parser itself is pure: :mod:`claimgraph.core.schema`)."""

from __future__ import annotations

from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import LIMITS
from claimgraph.core.schema.parse import parse_schema
from claimgraph.core.schema.types import GraphSchema
from claimgraph.errors import SchemaError

__all__ = ["load_schema_file"]


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
