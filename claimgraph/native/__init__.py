"""The native core (Rust, PyO3; the ``claimgraph-native`` package built from ``native/``).

The pure-Python core (:mod:`claimgraph.core`) is the executable specification; the native
module is an optional accelerator that must give the same bytes. It is used when it is
installed and ``CLAIMGRAPH_PURE`` is not ``1``; otherwise everything runs on Python. Every
native call either answers exactly as Python would or hands the case back (``None``), and the
hand-backs are counted (:data:`claimgraph.native.decide.DECLINED`).

``make install`` builds it when ``cargo`` is present and skips it silently otherwise; a test
fails under ``CI=true`` when it is not the module loaded (equivalence tests must never pass
pure against pure).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from claimgraph.core import state

__all__ = ["ABI", "ACTIVE", "module", "which"]

ABI = 3  # the interface version this package speaks; a stale build with another is not used


def _load() -> ModuleType | None:
    if os.environ.get("CLAIMGRAPH_PURE") == "1":
        return None
    try:
        import claimgraph_native
    except ImportError:
        return None
    if getattr(claimgraph_native, "ABI", None) != ABI:
        return None
    mod: ModuleType = claimgraph_native
    return mod


module: ModuleType | None = _load()
ACTIVE: bool = module is not None


def _tables() -> tuple[Any, Any]:
    assert module is not None
    from claimgraph.native import spill

    config = spill.configured()
    if config is None:
        store = module.Store()
    else:
        store = module.Store(
            spill=spill.SpillDB(config), keep=config.keep, chunk_bits=config.chunk_bits
        )
    return store.claims(), store.edges()


if module is not None:
    state.TABLES = _tables  # the fold's claims and edges in native tables (off the heap)


def which() -> str:
    """``native`` or ``python``: the core in use in this process."""
    return "native" if ACTIVE else "python"
