"""The public API is explicit: __all__ lists exactly what claimgraph exports."""

from __future__ import annotations

import claimgraph


def test_all_is_complete_and_importable() -> None:
    """Every public name of the package is in __all__, and every name in __all__ exists."""
    public = {n for n in dir(claimgraph) if not n.startswith("_")} - {"annotations"}
    modules = {n for n in public if type(getattr(claimgraph, n)).__name__ == "module"}
    assert public - modules == set(claimgraph.__all__) - {"__version__"}
    for name in claimgraph.__all__:
        assert hasattr(claimgraph, name)


def test_errors_share_one_root() -> None:
    """Every exported *Error class derives from ClaimgraphError."""
    for name in claimgraph.__all__:
        obj = getattr(claimgraph, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, claimgraph.ClaimgraphError), name
