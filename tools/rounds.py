"""Repeated measurements for the bench tools: every figure from at least 3 rounds.

``repeat(k, measure)`` runs a measurement ``k`` times; its result is the median round's
(its latencies), with every round's rate beside it, which ``rate`` prints as min / median / max.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

__all__ = ["MIN_ROUNDS", "median_round", "rate", "repeat", "spread"]

MIN_ROUNDS = 3


def median_round(rounds: list[dict[str, Any]], key: str = "per_s") -> dict[str, Any]:
    """The round whose ``key`` is the median (with an even count, the lower middle one)."""
    return sorted(rounds, key=lambda r: float(r[key]))[(len(rounds) - 1) // 2]


def repeat(k: int, measure: Callable[[], dict[str, Any]], key: str = "per_s") -> dict[str, Any]:
    """``measure()`` run ``k`` (>= 3) times: the median round, with ``rates``: every round's
    ``key``, in the order they ran."""
    if k < MIN_ROUNDS:
        raise ValueError(f"{k} rounds: at least {MIN_ROUNDS} (min / median / max)")
    runs = [measure() for _ in range(k)]
    return {**median_round(runs, key), "rates": [float(r[key]) for r in runs]}


def spread(values: list[float], digits: int = 0) -> str:
    """Values as min / median / max."""
    picks = (min(values), statistics.median(values), max(values))
    return " / ".join(f"{v:,.{digits}f}" for v in picks)


def rate(x: dict[str, Any], digits: int = 0) -> str:
    """A repeated measurement's rates as min / median / max."""
    return spread(x["rates"], digits)
