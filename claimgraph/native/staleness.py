"""Which core a process runs, and whether the native build found is stale.

A native build is **stale** when it is behind the specification — it does not implement the
rules revision ``CURRENT`` (graphs under it are then decided in Python), it names a policy,
mode or command kind the specification no longer has, it speaks another interface (``ABI``)
or cannot read the specification table — or when it was built from other sources than those
of the package installed: ``SOURCES``, the digest ``native/build.rs`` records, differs from
the same digest of the ``native/`` directory beside the package (a source checkout; an
installed wheel has none, and the sources are then not compared). ``claimgraph --version``
prints :func:`claimgraph.native.status`; ``make test`` reports a stale build and fails on it
under ``CI=true``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from claimgraph.native import spec as _spec
from claimgraph.native.spec import ENUMS

__all__ = ["NativeStatus", "checkout", "evaluate", "sources_digest"]

_FIXED = ("build.rs", "Cargo.toml", "Cargo.lock")


@dataclass(frozen=True, slots=True)
class NativeStatus:
    """The core in use and the native build found (``claimgraph --version`` prints it)."""

    core: str  # "native" or "python": the core deciding in this process
    why: str  # why this core ("loaded", "CLAIMGRAPH_PURE=1", "... is not installed", ...)
    build: Mapping[str, Any] | None = None  # the native build found: version, abi, sources
    stale: tuple[str, ...] = ()  # why the build found is stale (empty: current, or none)
    python_only: Mapping[str, Sequence[str]] = field(default_factory=dict)  # declined always

    def __str__(self) -> str:
        line = f"core: {self.core}"
        if self.build is not None:
            b = self.build
            rules = ", ".join(map(str, b.get("implements", {}).get("rules", ())))
            line += (
                f" (claimgraph-native {b.get('version')}, sources {str(b.get('sources'))[:12]},"
                f" rules {rules or '?'})"
            )
        if self.why != "loaded":
            line += f": {self.why}"
        lines = [line]
        lines += [f"native build stale: {why}" for why in self.stale]
        declined = [
            f"{key} {', '.join(names)}" for key, names in self.python_only.items() if key in ENUMS
        ]
        if declined:
            lines.append(
                f"decided in Python (not in the native declaration): {'; '.join(declined)}"
            )
        return "\n".join(lines)


def checkout() -> Path | None:
    """The ``native/`` sources beside the installed package (a source checkout), if any."""
    root = Path(__file__).resolve().parents[2] / "native"
    return root if (root / "build.rs").is_file() and (root / "src").is_dir() else None


def sources_digest(root: Path) -> str:
    """The digest ``native/build.rs`` records as ``SOURCES``, of the sources under ``root``."""
    files = sorted([*_FIXED, *(f"src/{p.name}" for p in (root / "src").glob("*.rs"))])
    h = hashlib.sha256()
    for rel in files:
        data = (root / rel).read_bytes()
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def evaluate(
    found: ModuleType | None,
    used: bool,
    why: str,
    abi: int,
    sources: Path | None = None,
) -> NativeStatus:
    """The status of a process that found ``found`` (None: no native module) and uses it or
    not (``used``, ``why``); ``sources``: the checkout to compare the build with."""
    core = "native" if used else "python"
    if found is None:
        return NativeStatus(core, why)
    implements: dict[str, Any] = {}
    get = getattr(found, "implements", None)
    if callable(get):
        implements = dict(get())
    build = {
        "version": getattr(found, "VERSION", None),
        "abi": getattr(found, "ABI", None),
        "sources": getattr(found, "SOURCES", None),
        "implements": implements,
    }
    stale: list[str] = []
    if build["abi"] != abi:
        stale.append(f"it speaks interface {build['abi']}; this package speaks {abi}")
    elif not used:
        stale.append(why)
    stale += _spec.mismatches(implements)
    if sources is not None:
        here = sources_digest(sources)
        if build["sources"] != here:
            stale.append(
                f"it was built from other sources (SOURCES {str(build['sources'])[:12]}; "
                f"{sources} hashes to {here[:12]}): make install rebuilds it"
            )
    return NativeStatus(core, why, build, tuple(stale), _spec.missing(implements))
