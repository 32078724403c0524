"""The specification the native module is handed at load, and its declaration checked against it.

The native core keeps no copy of a limit, a name or a code: :func:`table` is everything it
reads of the specification, built here from :mod:`claimgraph.core` (``LIMITS``, the decision
kinds and reason codes, the claim statuses, the schema's enums, the command catalogue, the key
separator), and ``claimgraph.native._rust.Spec(table())`` reads it once. What the native module does
keep is its declaration of what it implements (``claimgraph.native._rust.implements()``): rules
revisions, conflict policies, cardinalities, ``on_stale`` values, polarities, fallback modes
(a domain is implemented when its fallback is), command kinds, projection layouts — named as
the specification names them. Python hands it only commands inside that declaration and the
native checks decline the rest, so a revision, policy or command kind the specification gains
is decided in Python until the declaration lists it. :func:`mismatches` and :func:`missing`
compare the declaration with the specification (:func:`claimgraph.native.status` reports them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from claimgraph.core.commands import COMMAND_TYPES
from claimgraph.core.entities import (
    DISMISSED,
    LOST,
    RETIRED,
    SEP,
    STATUS_NAMES,
    SUPERSEDED,
    VISIBLE,
    WITHHELD,
)
from claimgraph.core.governor import revisions
from claimgraph.core.model import (
    LIMITS,
    Cardinality,
    ConflictPolicy,
    DecisionKind,
    OnStale,
    Polarity,
    Reason,
)
from claimgraph.core.schema.types import FALLBACK_MODES

__all__ = ["ENUMS", "mismatches", "missing", "table"]

# The declaration's keys that name members of a specification enum.
ENUMS: Mapping[str, type[StrEnum]] = {
    "policies": ConflictPolicy,
    "cardinalities": Cardinality,
    "on_stale": OnStale,
    "polarities": Polarity,
}


def _members(enum: type[StrEnum]) -> dict[str, str]:
    return {m.name: str(m.value) for m in enum}


def table() -> dict[str, Any]:
    """The specification as ``claimgraph.native._rust.Spec`` reads it (read when called)."""
    return {
        "limits": dict(LIMITS),
        "sep": SEP,
        "kinds": _members(DecisionKind),
        "reasons": _members(Reason),
        "statuses": {
            "VISIBLE": VISIBLE,
            "WITHHELD": WITHHELD,
            "LOST": LOST,
            "SUPERSEDED": SUPERSEDED,
            "RETIRED": RETIRED,
            "DISMISSED": DISMISSED,
        },
        "status_names": dict(STATUS_NAMES),
        "policies": _members(ConflictPolicy),
        "cardinalities": _members(Cardinality),
        "on_stale": _members(OnStale),
        "polarities": _members(Polarity),
        "fallback_modes": list(FALLBACK_MODES),
        "commands": list(COMMAND_TYPES),
    }


def mismatches(implements: Mapping[str, Sequence[Any]]) -> list[str]:
    """Why the declaration is behind the specification: a member, mode or command kind it
    names that the specification no longer has, or no implementation of ``CURRENT``."""
    out: list[str] = []
    for key, enum in ENUMS.items():
        for name in implements.get(key, ()):
            if name not in enum.__members__:
                out.append(f"it implements {key} {name}, which {enum.__name__} no longer has")
    for mode in implements.get("fallback_modes", ()):
        if mode not in FALLBACK_MODES:
            out.append(f"it implements fallback mode {mode!r}, which the schema no longer has")
    for key in ("decides", "folds"):
        for kind in implements.get(key, ()):
            if kind not in COMMAND_TYPES:
                out.append(f"it {key} command kind {kind!r}, which the catalogue no longer has")
    rules = list(implements.get("rules", ()))
    current = revisions.CURRENT
    if current not in rules:
        out.append(
            f"it implements rules revision(s) {', '.join(map(str, rules)) or 'none'}; the "
            f"specification's CURRENT is {current} (graphs under {current} are decided in Python)"
        )
    return out


def missing(implements: Mapping[str, Sequence[Any]]) -> dict[str, list[str]]:
    """The enum members and fallback modes of the specification the declaration does not list:
    decided in Python (not stale: the native core declines them)."""
    out: dict[str, list[str]] = {}
    for key, enum in ENUMS.items():
        names = [m.name for m in enum if m.name not in implements.get(key, ())]
        if names:
            out[key] = names
    modes = [m for m in FALLBACK_MODES if m not in implements.get("fallback_modes", ())]
    if modes:
        out["fallback_modes"] = modes
    return out
