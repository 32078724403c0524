"""The native core (Rust, PyO3: the extension :mod:`claimgraph.native._rust`, built from
``native/`` into the claimgraph package itself).

The pure-Python core (:mod:`claimgraph.core`) is the executable specification; the native
module is an optional accelerator that must give the same bytes. It is used when it is
installed and ``CLAIMGRAPH_PURE`` is not ``1``; otherwise everything runs on Python. Every
native call either answers exactly as Python would or hands the case back (``None``), and the
hand-backs are counted (:data:`claimgraph.native.decide.DECLINED`).

It is handed the specification once at load (:data:`SPEC`, from :mod:`claimgraph.native.spec`:
it keeps no copy of a limit, a name or a code) and declares what it implements
(:data:`IMPLEMENTS`); commands and decisions outside that declaration are Python's.

The package's build (``setup.py``: ``pip install``, ``make install``, the wheel) compiles it
when ``cargo`` is present and leaves it out otherwise; a test fails under ``CI=true`` when it
is not the module loaded (equivalence tests must never pass pure against pure), or when
:func:`status` says the build is stale.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from claimgraph.core import state
from claimgraph.native import spec as _spec
from claimgraph.native.staleness import NativeStatus, checkout, evaluate

__all__ = ["ABI", "ACTIVE", "IMPLEMENTS", "SPEC", "NativeStatus", "module", "status", "which"]

ABI = 4  # the interface version this package speaks; a stale build with another is not used


def _find() -> tuple[ModuleType | None, str]:
    """The native module installed (None: none, or CLAIMGRAPH_PURE=1), and why not."""
    if os.environ.get("CLAIMGRAPH_PURE") == "1":
        return None, "CLAIMGRAPH_PURE=1"
    name = f"{__name__}._rust"
    try:
        found = importlib.import_module(name)
    except ImportError as exc:
        if exc.name != name or not isinstance(exc, ModuleNotFoundError):
            return None, f"{name} is installed but does not load: {exc}"
        return None, "this install was built without the native core (no cargo)"
    return found, "loaded"


def _load(found: ModuleType | None, why: str) -> tuple[ModuleType | None, Any, str]:
    """The module to use with its :class:`claimgraph.native._rust.Spec`, or why it is not used."""
    if found is None:
        return None, None, why
    abi = getattr(found, "ABI", None)
    if abi != ABI:
        return None, None, f"its interface is {abi}, this package speaks {ABI}: rebuild it"
    try:
        spec = found.Spec(_spec.table())
    except ValueError as exc:
        return None, None, f"it cannot run under this specification: {exc}"
    return found, spec, why


_found, _why = _find()
module, SPEC, _why = _load(_found, _why)
ACTIVE: bool = module is not None
# What the native module implements (claimgraph.native._rust.implements(); empty without it):
# Python hands it only commands and decisions inside this declaration.
IMPLEMENTS: dict[str, list[Any]] = dict(module.implements()) if module is not None else {}


def status() -> NativeStatus:
    """The core in use, the native build found and why it is stale, if it is (the build is
    compared with the ``native/`` sources beside the package when there are some)."""
    return evaluate(_found, ACTIVE, _why, ABI, checkout())


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
