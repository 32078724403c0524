"""Write the typed read methods every graph and run offers, from the query catalogue.

Each read of :mod:`claimgraph.core.queries` becomes a typed method that calls the one read
operation, ``read(name, **params)``: on graphs (sync and async) with ``at`` and ``timeout``
where the read takes them, on runs (sync and async) for the reads a run traces, at its pinned
version. The modules are checked in (so ``mypy --strict``, ``__all__`` and a reader see real
signatures); ``tests/test_query_catalogue.py`` regenerates them and fails on any difference.

Usage: .venv/bin/python tools/gen_reads.py [--check]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from claimgraph.core.commands import Kind
from claimgraph.core.queries import QUERIES, Param, QuerySpec

ROOT = Path(__file__).resolve().parent.parent
SYNC = ROOT / "claimgraph" / "service" / "catalogue_reads.py"
ASYNC = ROOT / "claimgraph" / "sdk" / "aio_reads.py"

_HEADER = '''"""{doc}

Generated from the query catalogue (:mod:`claimgraph.core.queries`) by ``tools/gen_reads.py``:
do not edit; change the catalogue and regenerate (a test fails while they differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from claimgraph.core.model import Decision
    from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
    from claimgraph.service.api import NodeLike
    from claimgraph.service.queries import PathsResult, ReachResult
    from claimgraph.service.reads import EdgeRef

__all__ = [{names}]

_ = (Any, Literal, Sequence)  # the signatures below name them
'''


def annotation(p: Param) -> str:
    """The Python type of a parameter, from its domain."""
    d = p.domain
    if p.annotation:
        t = p.annotation
    elif p.node:
        t = "NodeLike"
    elif d.kind is Kind.BOOL:
        t = "bool"
    elif d.kind in (Kind.INT, Kind.TIME):
        t = "int"
    elif d.kind is Kind.FLOAT:
        t = "float"
    elif d.kind is Kind.ENUM:
        t = "Literal[" + ", ".join(f'"{v}"' for v in d.values) + "]"
    elif d.kind is Kind.LIST:
        t = "Sequence[str]"
    else:
        t = "str"
    return f"{t} | None" if d.nullable else t


def _default(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _signature(params: tuple[Param, ...]) -> list[str]:
    out = ["self,"]
    star = False
    for p in params:
        if not p.positional and not star:
            out.append("*,")
            star = True
        d = "" if p.required else f" = {_default(p.default)}"
        out.append(f"{p.keyword}: {annotation(p)}{d},")
    return out


def method(spec: QuerySpec, *, run: bool, aio: bool) -> str:
    """One typed read: the catalogue's parameters, a call of ``read``."""
    params = spec.params if run else spec.all_params
    sig = "\n        ".join(_signature(params))
    args = "".join(f"\n                {p.keyword}={p.keyword}," for p in params)
    doc = spec.summary
    if run:
        doc += "\n\n        At the run's pinned version, recorded in its trace."
    await_ = "await " if aio else ""
    return (
        f"    {'async ' if aio else ''}def {spec.name}(\n        {sig}\n    ) -> {spec.result}:\n"
        f'        """{doc}"""\n'
        f"        return cast(\n"
        f'            "{spec.result}",\n'
        f"            {await_}self.read(\n"
        f'                "{spec.name}",{args}\n'
        f"            ),\n"
        f"        )\n"
    )


def _class(name: str, doc: str, specs: list[QuerySpec], *, run: bool, aio: bool) -> str:
    read = (
        f"    {'async ' if aio else ''}def read(self, query: str, /, **params: Any) -> Any:\n"
        '        """The one read operation (the subclass answers it)."""\n'
        "        raise NotImplementedError\n"
    )
    body = "\n".join([read, *(method(s, run=run, aio=aio) for s in specs)])
    return f'\n\nclass {name}:\n    """{doc}"""\n\n{body}'


def render(aio: bool) -> str:
    """The module's text, formatted as ``ruff format`` leaves it."""
    specs = list(QUERIES.values())
    traced = [s for s in specs if s.traced]
    prefix = "Async" if aio else ""
    graph, run = f"{prefix}CatalogueReads", f"{prefix}RunReads"
    kind = "awaitable " if aio else ""
    text = _HEADER.format(
        doc=f"Every catalogued read as a typed {kind}method over ``read``, for graphs and runs.",
        names=f'"{graph}", "{run}"',
    )
    text += _class(
        graph,
        f"Each read of the catalogue as a typed {kind}method: ``read(name, ...)``.",
        specs,
        run=False,
        aio=aio,
    )
    text += _class(
        run,
        f"Each read a run traces as a typed {kind}method, at the run's pinned version.",
        traced,
        run=True,
        aio=aio,
    )
    return _format(text)


def _format(text: str) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "format", "--stdin-filename", "generated.py", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if a module is not current")
    args = ap.parse_args()
    stale = []
    for path, aio in ((SYNC, False), (ASYNC, True)):
        text = render(aio)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("not current (run tools/gen_reads.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
