"""Declarative resolver rules in CEL (Common Expression Language, via cel-python).

CEL is the ecosystem's standard for policy conditions: side-effect free, no I/O, no loops
beyond its bounded macros (``exists``, ``all``, ``filter``, ``map``), and evaluated by an
interpreter that never reaches Python's ``eval``. A rule reads::

    - name: block-wins
      when: 'claims.exists(c, c.object == "BLOCK_TRANSACTION")'
      adopt: 'c.object == "BLOCK_TRANSACTION"'

``when`` sees ``claims`` — a list of maps, one per claim held in the conflict, with the keys
``claim_id agent task subject subject_type object object_type polarity confidence accuracy
evidence reasoning asserted_at based_on_version properties`` — plus ``edge_type`` and
``domain``. ``adopt`` sees one claim as ``c`` and selects the claims to adopt (they must agree
on one outcome, or the rule does not apply). An expression that fails at run time (a missing
key, a type error) makes its rule not apply; it never raises into the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, CELSyntaxError, CELUnsupportedError

from claimgraph.errors import RuleError

__all__ = ["compile_cel", "evaluate", "matches"]


_ENV = celpy.Environment()


@lru_cache(maxsize=512)
def _program(expr: str) -> Any:
    return _ENV.program(_ENV.compile(expr))


def compile_cel(expr: str) -> str | None:
    """Compile ``expr``; return ``None`` if it is valid CEL, else a one-line problem."""
    try:
        _program(expr)
    except CELParseError as exc:  # lark's parse and lex errors, wrapped by celpy
        text = " ".join(str(exc).split())
        return text[:300] or type(exc).__name__
    return None


def _to_cel(value: Any) -> Any:
    return celpy.json_to_cel(value)  # type: ignore[attr-defined]


def evaluate(expr: str, activation: Mapping[str, Any]) -> Any:
    """Evaluate ``expr`` with JSON-like variables; raise :class:`RuleError` on failure."""
    prog = _program(expr)
    try:
        result = prog.evaluate({k: _to_cel(v) for k, v in activation.items()})
    # celpy's evaluator recurses per node: a deeply nested expression exhausts the stack
    except (CELEvalError, CELSyntaxError, CELUnsupportedError, RecursionError) as exc:
        raise RuleError(" ".join(str(exc).split())[:300]) from None
    if isinstance(result, Exception):
        raise RuleError(str(result)[:300])
    return result


def matches(expr: str, activation: Mapping[str, Any]) -> bool:
    """Whether a boolean CEL condition holds (a non-boolean result is an error)."""
    result = evaluate(expr, activation)
    if not isinstance(result, celtypes.BoolType | bool):
        raise RuleError(f"expected a boolean, got {type(result).__name__}")
    return bool(result)


def select(expr: str, claims: Sequence[Mapping[str, Any]], extra: Mapping[str, Any]) -> list[str]:
    """The ids of the claims ``c`` for which ``expr`` holds."""
    out: list[str] = []
    for c in claims:
        if matches(expr, {**extra, "c": c}):
            out.append(str(c["claim_id"]))
    return out
