"""``decide`` on the native core where it covers the command, else the Python governor.

The native path (:class:`claimgraph.native._rust.Hot`) decides ``assert``, ``deny`` and ``retract``
commands under a rules revision it implements (:data:`claimgraph.native.IMPLEMENTS`: a graph
under another one — ``CURRENT`` included, when the native module is behind it — is decided in
Python, counted as ``rules``) — the hot path of ingest — when they are accepted
(or retired) without a conflict, conflicted by a newer claim under last-write-wins, or rejected
as a duplicate command id or (``on_stale: reject``) a stale claim. Everything else is declined
before or inside it and decided by :func:`claimgraph.core.governor.decide`, the specification;
each decline is counted by its reason in :data:`DECLINED` (and each native decision in
:data:`DECIDED`), so a benchmark says what fraction ran natively. Both give the same decision,
key for key. :func:`evolve` does the same for the fold (:class:`claimgraph.native._rust.Fold`: those
decisions, and every rejection).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

from claimgraph.core.governor import decide as python_decide
from claimgraph.core.governor import revisions
from claimgraph.core.model import Decision
from claimgraph.core.state import Changes, GraphState
from claimgraph.native import IMPLEMENTS, SPEC, module
from claimgraph.native.codec import native_codecs

__all__ = [
    "DECIDED",
    "DECLINED",
    "FOLDED",
    "FOLD_DECLINED",
    "decide",
    "evolve",
    "native_share",
    "reset_counts",
    "revision",
]

DECIDED: Counter[str] = Counter()  # command type → decided natively
DECLINED: Counter[str] = Counter()  # why the native path handed a command to Python
FOLDED: Counter[str] = Counter()  # command type → folded natively
FOLD_DECLINED: Counter[str] = Counter()  # why the native fold handed a decision to Python


@cache
def _hot() -> Any:
    nc = native_codecs()
    if module is None or nc is None:
        return None
    reg = nc.registry
    claim, retract = reg.current("claim"), reg.current("retract")
    return module.Hot(
        SPEC,
        nc.readers[claim.header][1],
        claim.header,
        nc.readers[retract.header][1],
        retract.header,
    )


_RULES = frozenset(IMPLEMENTS.get("rules", ()))  # the revisions the native decide implements


def revision(state: GraphState, rules: int | None = None) -> int:
    """The rules revision a command of this graph is decided under (as ``decide`` picks it:
    ``rules`` when given, else the graph's, else ``CURRENT`` for an empty graph)."""
    if rules is not None:
        return rules
    return revisions.CURRENT if state.rules is None else state.rules


def _precheck(state: GraphState, rules: int | None, partition: int | None) -> str | None:
    """Why the native path cannot take a command of this graph now (None: it may)."""
    if revision(state, rules) not in _RULES:
        return "rules"
    schema = state.schema
    if schema is None:
        return "no_schema"
    if schema.signatures_required:
        return "signatures"
    if partition is not None and state.placed != partition:
        return "placement"
    return None


def _decide(
    state: GraphState,
    data: bytes,
    input_offset: int,
    log_time: int,
    *,
    rules: int | None = None,
    partition: int | None = None,
    operator: str | None = None,
) -> Decision:
    """:func:`claimgraph.core.governor.decide`, natively where the native path covers it."""
    hot = _hot()
    if hot is not None:
        why = _precheck(state, rules, partition)
        if why is None:
            d, why = hot.decide(state, data, input_offset, log_time, revision(state, rules))
            if d is not None:
                DECIDED[d["command_type"]] += 1
                decision: Decision = d
                return decision
        DECLINED[why] += 1
    return python_decide(
        state, data, input_offset, log_time, rules=rules, partition=partition, operator=operator
    )


decide: Callable[..., Decision] = _decide if module is not None else python_decide
"""``decide(state, data, input_offset, log_time, *, rules=None, partition=None,
operator=None)``: natively
where the native path covers the command; without the native module, the Python governor's
own function (no wrapper)."""


@cache
def _fold() -> Any:
    if module is None:
        return None
    from claimgraph.core import entities

    return module.Fold(SPEC, entities.Changes)


def _evolve(state: GraphState, d: Decision, version: int, raw: bytes | None = None) -> Changes:
    """``state.evolve(d, version, raw)``, natively for the decisions the native fold covers."""
    if raw is not None:
        ch, why = _fold().evolve(state, d, version, raw)
        if ch is not None:
            FOLDED[d["command_type"]] += 1
            changes: Changes = ch
            return changes
    else:
        why = "raw"
    FOLD_DECLINED[why] += 1
    return state.evolve(d, version, raw)


def _python_evolve(
    state: GraphState, d: Decision, version: int, raw: bytes | None = None
) -> Changes:
    return state.evolve(d, version, raw)


evolve: Callable[..., Changes] = _evolve if module is not None else _python_evolve
"""``evolve(state, d, version, raw=None)``: :meth:`GraphState.evolve`, natively where the
native fold covers the decision (an accepted or conflicted claim without a conflict id, the
retraction of a claim not withheld, any rejection); the same state changes, in the same order,
and the same :class:`Changes`."""


def native_share() -> float:
    """The fraction of commands decided natively since the counts were last reset."""
    done = sum(DECIDED.values())
    total = done + sum(DECLINED.values())
    return done / total if total else 0.0


def reset_counts() -> None:
    DECIDED.clear()
    DECLINED.clear()
    FOLDED.clear()
    FOLD_DECLINED.clear()
