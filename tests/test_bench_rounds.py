"""The bench tools' repeated measurements (tools/rounds.py): every figure from >= 3 rounds."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def rounds() -> Iterator[Any]:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import rounds as mod

        yield mod
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_repeat_keeps_the_median_round_and_every_rate(rounds: Any) -> None:
    """repeat runs the measurement k times; its latencies are the median round's, its rates
    every round's in order, printed as min / median / max."""
    runs = iter([{"per_s": 30.0, "p50": 3}, {"per_s": 10.0, "p50": 1}, {"per_s": 20.0, "p50": 2}])
    r = rounds.repeat(3, lambda: next(runs))
    assert (r["per_s"], r["p50"], r["rates"]) == (20.0, 2, [30.0, 10.0, 20.0])
    assert rounds.rate(r) == "10 / 20 / 30"
    assert rounds.rate({"rates": [1.25, 2.5, 1000.0, 3.0]}, 1) == "1.2 / 2.8 / 1,000.0"


def test_fewer_than_three_rounds_is_refused(rounds: Any) -> None:
    """Two rounds give no honest min / median / max: refused before measuring."""
    calls: list[int] = []
    with pytest.raises(ValueError, match="at least 3"):
        rounds.repeat(2, lambda: calls.append(1) or {"per_s": 1.0})
    assert calls == []
