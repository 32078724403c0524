"""What the native-core tests share: the CI rule, and values compared with their types."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from claimgraph import native


def require_native() -> None:
    """Skip without the native module; under ``CI=true`` fail instead.

    Equivalence tests must never pass pure against pure: on CI the native module must be the
    one loaded (``make install`` builds it there), so its absence is a failure.
    """
    if native.ACTIVE:
        return
    why = native.status().why
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true but the native core is not loaded ({why}): the equivalence tests would "
            "compare Python with itself"
        )
    pytest.skip(f"the native core is not loaded: {why}")


def typed(value: Any) -> Any:
    """``value`` with every leaf tagged by its exact type (floats by their bits): equal
    results are equal values of equal types, so ``True`` is not ``1`` and ``1`` not ``1.0``."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(x) for x in value])
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


@contextmanager
def tiny_spill() -> Iterator[None]:
    """Native tables made inside keep one chunk of 2 claims in memory and spill the rest (the
    equivalence tests run with it too: every path through the spill gives the same bytes)."""
    from claimgraph.native import spill

    before = spill.configured()
    spill.configure(spill.SpillConfig(2, chunk_bits=1))
    try:
        yield
    finally:
        spill.configure(before)
