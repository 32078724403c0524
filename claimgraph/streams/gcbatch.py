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

After the freeze, :func:`release_free_memory` hands the free pages of the C allocator's heaps
back to the system (glibc's ``malloc_trim(0)``; elsewhere nothing): a batch's transient
objects (decisions, row buffers) leave free memory that glibc would otherwise keep resident.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["GEN0_BATCH", "batch_gc", "release_free_memory"]

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
    release_free_memory()


def _malloc_trim() -> Callable[[int], int] | None:
    try:  # the symbols the process already has: glibc's malloc_trim, where it is glibc
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Return the C heaps' free pages to the system; False where there is no malloc_trim."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
