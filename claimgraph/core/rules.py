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

Evaluation is bounded (:class:`RuleLimits`), by counting, not timing (the core has no
clock): every AST node visited is a step and a value built costs one more step per 64 of its
elements, so ``claims.all(a, claims.all(b, ...))`` nested twenty deep stops at the step
limit instead of running for hours; a string, list or map beyond ``max_value`` elements and
an activation beyond ``max_input`` bytes of JSON stop it too. Either way the rule does not
apply (a :class:`~claimgraph.errors.RuleError` naming the limit) and the chain moves on.
How big an expression may be is the schema parser's business, not this module's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, CELSyntaxError, CELUnsupportedError, Evaluator

from claimgraph.errors import RuleError

__all__ = [
    "RULE_LIMITS",
    "RuleLimits",
    "compile_cel",
    "evaluate",
    "input_size",
    "matches",
    "select",
]


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


@dataclass(frozen=True, slots=True)
class RuleLimits:
    """What one evaluation of a CEL rule may cost (counted, never timed: the core has no clock).

    ``max_steps``: AST nodes visited, where a result of N elements or characters costs
    ``N // 64`` more (so copying big values is paid for); ``max_value``: the largest string,
    list or map an expression may build; ``max_input``: the activation's size as JSON
    (bytes), checked before any CEL runs.
    """

    max_steps: int = 50_000
    max_value: int = 100_000
    max_input: int = 1024 * 1024


RULE_LIMITS = RuleLimits()


class _OverBudget(BaseException):
    """Raised through celpy (which swallows and logs Exceptions) when a limit is reached."""


class _Budget:
    __slots__ = ("left", "limits")

    def __init__(self, limits: RuleLimits) -> None:
        self.limits = limits
        self.left = limits.max_steps


class _Metered(Evaluator):
    """celpy's evaluator, charged per node visited and per element of what a node builds."""

    budget: _Budget

    def _visit_tree(self, tree: Any) -> Any:
        b = self.budget
        b.left -= 1
        if b.left < 0:
            raise _OverBudget(f"more than {b.limits.max_steps} evaluation steps")
        result = super()._visit_tree(tree)
        if isinstance(result, str | bytes | list | dict):
            n = len(result)
            if n > b.limits.max_value:
                raise _OverBudget(f"a value of {n} elements (at most {b.limits.max_value})")
            b.left -= n >> 6
        return result

    def sub_evaluator(self, ast: Any) -> Evaluator:
        sub = _Metered(ast, activation=self.activation)
        sub.budget = self.budget
        return sub


def input_size(activation: Mapping[str, Any]) -> int:
    """The activation's size as compact JSON (what ``RuleLimits.max_input`` bounds)."""
    return len(json.dumps(activation, separators=(",", ":"), default=str).encode())


def _check_input(activation: Mapping[str, Any], limits: RuleLimits) -> None:
    if (size := input_size(activation)) > limits.max_input:
        raise RuleError(f"the rule's input is {size} bytes of JSON (at most {limits.max_input})")


def _run(expr: str, context: Mapping[str, Any], budget: _Budget) -> Any:
    """Evaluate ``expr`` over variables already converted to CEL values."""
    prog = _program(expr)
    ev = _Metered(prog.ast, activation=prog.new_activation())
    ev.budget = budget
    try:
        result = ev.evaluate(dict(context))
    # celpy's evaluator recurses per node: a deeply nested expression exhausts the stack
    except (CELEvalError, CELSyntaxError, CELUnsupportedError, RecursionError) as exc:
        raise RuleError(" ".join(str(exc).split())[:300]) from None
    except _OverBudget as exc:
        raise RuleError(f"over the evaluation limits: {exc}") from None
    if isinstance(result, Exception):
        raise RuleError(str(result)[:300])
    return result


def _truth(result: Any) -> bool:
    if not isinstance(result, celtypes.BoolType | bool):
        raise RuleError(f"expected a boolean, got {type(result).__name__}")
    return bool(result)


def evaluate(expr: str, activation: Mapping[str, Any], limits: RuleLimits = RULE_LIMITS) -> Any:
    """Evaluate ``expr`` with JSON-like variables; raise :class:`RuleError` on failure.

    Bounded by ``limits``: an activation larger than ``max_input``, or an expression that
    needs more steps or builds bigger values, is a RuleError (its rule does not apply).
    """
    _check_input(activation, limits)
    return _run(expr, {k: _to_cel(v) for k, v in activation.items()}, _Budget(limits))


def matches(expr: str, activation: Mapping[str, Any], limits: RuleLimits = RULE_LIMITS) -> bool:
    """Whether a boolean CEL condition holds (a non-boolean result is an error)."""
    return _truth(evaluate(expr, activation, limits))


def select(
    expr: str,
    claims: Sequence[Mapping[str, Any]],
    extra: Mapping[str, Any],
    limits: RuleLimits = RULE_LIMITS,
) -> list[str]:
    """The ids of the claims ``c`` for which ``expr`` holds (one budget for all of them)."""
    _check_input({**extra, "claims": claims}, limits)
    budget = _Budget(limits)
    context = {k: _to_cel(v) for k, v in extra.items()}  # converted once, not once per claim
    return [
        str(c["claim_id"])
        for c in claims
        if _truth(_run(expr, {**context, "c": _to_cel(c)}, budget))
    ]
