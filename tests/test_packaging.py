"""The one distribution: what the build puts in the wheel and the sdist, checked statically.

``make wheel-demo`` (CI) builds both and runs the wheel outside the repository; these checks
are the cheap half, run by every ``make test``: every data file of the package is declared,
the sdist carries everything the native build reads, and the native core is optional except
where it is required.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType

import pytest

from claimgraph.native import staleness
from tests.conftest import ROOT


def _setup() -> ModuleType:
    spec = importlib.util.spec_from_file_location("claimgraph_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: declarations only, no build
    return module


def test_every_data_file_of_the_package_is_in_the_wheel() -> None:
    """Each file under claimgraph/ that is not Python (nor a build product) matches a
    PACKAGE_DATA pattern, and so do the schemas the package ships as claimgraph/_schemas."""
    data = _setup().PACKAGE_DATA
    roots = {"claimgraph": ROOT / "claimgraph", "claimgraph._schemas": ROOT / "schemas"}
    roots["claimgraph.http"] = ROOT / "claimgraph" / "http"
    files = [
        p
        for p in (ROOT / "claimgraph").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".py", ".so", ".pyc")
    ]
    files += [p for p in (ROOT / "schemas").rglob("*") if p.is_file()]
    assert len(files) > 20
    missing = []
    for f in files:
        ok = any(
            f.is_relative_to(roots[pkg])
            and any(fnmatch(f.relative_to(roots[pkg]).as_posix(), g) for g in globs)
            for pkg, globs in data.items()
        )
        if not ok:
            missing.append(str(f.relative_to(ROOT)))
    assert not missing, f"not in setup.py's PACKAGE_DATA, so not in the wheel: {missing}"


def test_the_sdist_carries_what_the_native_build_reads() -> None:
    """MANIFEST.in includes every native source the build (and SOURCES) covers."""
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8")
    for name in staleness._FIXED:
        assert re.search(rf"^include .*\bnative/{re.escape(name)}\b", manifest, re.M), name
    assert "graft native/src" in manifest and "graft schemas" in manifest
    assert "prune native/target" in manifest


def test_the_native_core_is_optional_unless_required() -> None:
    """setup.py builds the extension optional (a machine without cargo installs the Python
    core) and required under CLAIMGRAPH_BUILD_NATIVE=required (CI, the image, make dist)."""
    code = (
        "import runpy, setuptools\n"
        "seen = {}\n"
        "setuptools.setup = lambda **kw: seen.update(kw)\n"
        "runpy.run_path('setup.py', run_name='__main__')\n"
        "(ext,) = seen['rust_extensions']\n"
        "print(ext.name, ext.optional, ext.debug)\n"
    )
    for env, optional in (({}, "True"), ({"CLAIMGRAPH_BUILD_NATIVE": "required"}, "False")):
        base = {k: v for k, v in os.environ.items() if k != "CLAIMGRAPH_BUILD_NATIVE"}
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert out == ["claimgraph.native._rust", optional, "False"], (env, out)


def test_makefile_and_ci_build_the_wheel_and_run_it_outside() -> None:
    """`make dist` requires the native core and twine-checks; `make wheel-demo` runs the
    wheel's demo through tools/wheel_demo.sh, which works in a temporary directory; CI runs
    it with the native build required, then the README's test command, then the soaks that
    ``make test`` skips."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    dist = makefile.split("\ndist:", 1)[1].split("\n\n", 1)[0]
    assert "CLAIMGRAPH_BUILD_NATIVE=required" in dist and "-m build" in dist
    assert "twine check --strict dist/*" in dist
    assert "tools/wheel_demo.sh dist/*.whl" in makefile
    script = (ROOT / "tools" / "wheel_demo.sh").read_text(encoding="utf-8")
    assert 'cd "$work"' in script and "mktemp -d" in script and "^core: native " in script
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "export CLAIMGRAPH_BUILD_NATIVE=required" in ci
    commands = [line for line in ci.splitlines() if line.startswith("make ")]
    assert commands == ["make kafka-fetch", "make wheel-demo", "make test", "make soak"], commands
    soak = makefile.split("\nsoak:", 1)[1].split("\n\n", 1)[0]
    assert "SLOW=1" in soak and "-m slow" in soak
    assert Path(ROOT / "tools" / "wheel_demo.sh").stat().st_mode & 0o111


def test_the_python_core_runs_only_where_the_native_module_cannot_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No native module in the install, one that is there but does not load, and
    CLAIMGRAPH_PURE=1 each fall back to the Python core and say which it was."""
    from claimgraph import native

    name = "claimgraph.native._rust"

    def absent(_: str) -> ModuleType:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def broken(_: str) -> ModuleType:
        raise ImportError("undefined symbol: PyFoo", name=name, path="/x/_rust.abi3.so")

    monkeypatch.delenv("CLAIMGRAPH_PURE", raising=False)
    monkeypatch.setattr(native.importlib, "import_module", absent)
    assert native._find() == (None, "this install was built without the native core (no cargo)")
    monkeypatch.setattr(native.importlib, "import_module", broken)
    found, why = native._find()
    assert found is None and why.startswith(f"{name} is installed but does not load:"), why
    assert "undefined symbol" in why
    monkeypatch.setenv("CLAIMGRAPH_PURE", "1")
    assert native._find() == (None, "CLAIMGRAPH_PURE=1")
