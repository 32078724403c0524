"""Pin the compose image's dependencies: every distribution ``claimgraph[EXTRAS]`` needs.

    python tools/constraints.py > compose/constraints.txt

The closure is walked from the installed metadata of this environment (``make install``), so
the image gets exactly the versions the test suite ran with. ``tests/test_compose.py`` fails
when a distribution the package needs is not pinned there.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import distribution

from packaging.requirements import Requirement

EXTRAS = ("kafka", "http", "mcp")  # what compose/Dockerfile installs
# the build backend, installed first so the package builds without an unpinned isolated env
BUILD = {
    "hatchling": "1.33.0",
    "packaging": "26.4",
    "pathspec": "1.1.1",
    "pluggy": "1.7.0",
    "tomlkit": "0.15.2",
    "trove-classifiers": "2026.9.21.13",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "claimgraph", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """Every distribution ``root[extras]`` needs here → its installed version."""
    seen: dict[str, set[str]] = {}

    def walk(name: str, wanted: set[str]) -> None:
        dist = distribution(name)
        key = _norm(dist.metadata["Name"])
        if key in seen and wanted <= seen[key]:
            return
        seen.setdefault(key, set()).update(wanted)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(
                req.marker.evaluate({"extra": e}) for e in (*wanted, "")
            ):
                continue
            walk(req.name, set(req.extras))

    walk(root, set(extras))
    seen.pop(_norm(root))
    return {k: distribution(k).version for k in sorted(seen)}


def main() -> int:
    print(f"# pinned by tools/constraints.py: claimgraph[{','.join(EXTRAS)}] as tested")
    pins = {**BUILD, **closure()}
    for name in sorted(pins):
        print(f"{name}=={pins[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
