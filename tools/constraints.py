"""Pin the compose image's dependencies: every distribution ``claimgraph[EXTRAS]`` needs.

    python tools/constraints.py > compose/constraints.txt

The closure is walked from the installed metadata of this environment (``make install``), so
the image gets exactly the versions the test suite ran with. ``tests/test_compose.py`` fails
when a distribution the package needs is not pinned there.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement

EXTRAS = ("kafka", "http", "mcp")  # what compose/Dockerfile installs
ROOT = Path(__file__).resolve().parents[1]


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


def build_backend() -> dict[str, str]:
    """pyproject.toml's ``[build-system] requires`` and what they need → installed version
    (``make install`` puts them in the venv). The Dockerfile's builder stage installs them
    pinned, so the wheel builds without an unpinned isolated environment."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        requires = tomllib.load(f)["build-system"]["requires"]
    pins: dict[str, str] = {}
    for text in requires:
        name = Requirement(text).name
        pins[_norm(name)] = distribution(name).version
        pins.update(closure(name, ()))
    return pins


BUILD = build_backend()


def main() -> int:
    print(f"# pinned by tools/constraints.py: claimgraph[{','.join(EXTRAS)}] as tested")
    pins = {**BUILD, **closure()}
    for name in sorted(pins):
        print(f"{name}=={pins[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
