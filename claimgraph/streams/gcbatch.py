"""The cyclic garbage collector around a batch of decisions: raised threshold, then frozen.

Folding a batch keeps almost everything it allocates (claims, edges, tuples), and the
decisions it builds stay alive until the batch is written: with the default threshold (700
allocations) the young generations are collected dozens of times per batch, each pass
rescanning what the batch has built so far, and none finds garbage. Inside :func:`batch_gc`
the young generation's threshold is raised to :data:`GEN0_BATCH`; on the way out the
thresholds are put back and, after a batch that completed, ``gc.freeze()`` moves what
survived out of every later collection (as every batch did before).

A batch makes no reference cycles (``tests/test_gcbatch.py`` folds a stream with conflicts,
resolutions and retractions and finds none), so nothing is collected at its end: one pass
over a batch's young objects costs more than all the default collections it replaces. Cycles
made by other code (a caught exception's traceback) are still collected at the raised rate.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GEN0_BATCH", "batch_gc"]

GEN0_BATCH = 100_000  # allocations of container objects between young collections in a batch


@contextmanager
def batch_gc(threshold: int = GEN0_BATCH) -> Iterator[None]:
    """Run a batch with the young generation's threshold raised; restore it, then freeze."""
    old = gc.get_threshold()
    gc.set_threshold(max(threshold, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
    gc.freeze()  # the folded state is long-lived: keep it out of every later collection
