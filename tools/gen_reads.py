"""Write the typed read and write methods every graph and run offers, from the catalogues.

Each read of :mod:`claimgraph.core.queries` becomes a typed method that calls the one read
operation, ``read(name, **params)``: on graphs (sync and async) with ``at`` and ``timeout``
where the read takes them, on runs (sync and async) for the reads a run traces, at its pinned
version. Each write of :mod:`claimgraph.core.writes` becomes a typed method that calls the
one write operation, ``write(name, **params)``: on graphs (sync and async) with the envelope
(``agent``, ``task`` where the write takes it, ``command_id``), on runs for the writes a run
offers (as the run's agent, in its run). The modules are checked in (so ``mypy --strict``,
``__all__`` and a reader see real signatures); ``tests/test_query_catalogue.py`` and
``tests/test_write_catalogue.py`` regenerate them and fail on any difference.

Usage: .venv/bin/python tools/gen_reads.py [--check]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from claimgraph.core.commands import Domain, Kind
from claimgraph.core.queries import QUERIES, Param, QuerySpec
from claimgraph.core.writes import WRITES, WriteSpec

ROOT = Path(__file__).resolve().parent.parent
SYNC = ROOT / "claimgraph" / "service" / "catalogue_reads.py"
ASYNC = ROOT / "claimgraph" / "sdk" / "aio_reads.py"
SYNC_WRITES = ROOT / "claimgraph" / "service" / "catalogue_writes.py"
ASYNC_WRITES = ROOT / "claimgraph" / "sdk" / "aio_writes.py"

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
    elif d.kind is Kind.BYTES:
        t = "bytes"
    elif d.kind is Kind.MAP:
        t = "dict[str, str]"
    else:
        t = "str"
    nullable = d.nullable or p.default is None
    return f"{t} | None" if nullable and not t.endswith("| None") else t


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


_WRITES_HEADER = '''"""{doc}

Generated from the write catalogue (:mod:`claimgraph.core.writes`) by ``tools/gen_reads.py``:
do not edit; change the catalogue and regenerate (a test fails while they differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from claimgraph.service.api import NodeLike, Receipt

__all__ = [{names}]

_ = (Any, Literal, Sequence)  # the signatures below name them
'''

_ENVELOPE = (
    Param("agent", Domain(Kind.ID, nullable=True), None),
    Param("task", Domain(Kind.ID, nullable=True), None),
)
_COMMAND_ID = Param("command_id", Domain(Kind.ID, nullable=True), None)
_IN_RUN = ("agent", "task", "run_id")  # what a run sets on its writes


def _wrap(text: str) -> str:
    """A docstring's text, wrapped to the line length at a method body's indentation."""
    import textwrap

    return textwrap.fill(
        text, width=96, initial_indent="    " * 2, subsequent_indent="    " * 2
    ).lstrip()


def write_params(spec: WriteSpec, *, run: bool) -> tuple[Param, ...]:
    """The parameters of a write's method: its own, then the envelope it takes."""
    if run:
        return (*tuple(p for p in spec.params if p.name not in _IN_RUN), _COMMAND_ID)
    env = _ENVELOPE if spec.task else _ENVELOPE[:1]
    lead = tuple(p for p in spec.params if p.positional)
    rest = tuple(p for p in spec.params if not p.positional)
    return lead + env + rest + (_COMMAND_ID,)


def write_method(spec: WriteSpec, *, run: bool, aio: bool) -> str:
    """One typed write: the catalogue's parameters, a call of ``write``."""
    params = write_params(spec, run=run)
    sig = "\n        ".join(_signature(params))
    args = "".join(f"\n                {p.keyword}={p.keyword}," for p in params)
    doc = _wrap(spec.summary)
    if run:
        tail = ", based on its pinned version unless given." if spec.command == "claim" else "."
        doc += "\n\n" + _wrap("As the run's agent, in its task and run" + tail)
    await_ = "await " if aio else ""
    return (
        f"    {'async ' if aio else ''}def {spec.name}(\n        {sig}\n    ) -> Receipt:\n"
        f'        """{doc}"""\n'
        f"        return cast(\n"
        f'            "Receipt",\n'
        f"            {await_}self.write(\n"
        f'                "{spec.name}",{args}\n'
        f"            ),\n"
        f"        )\n"
    )


def _write_class(name: str, doc: str, specs: list[WriteSpec], *, run: bool, aio: bool) -> str:
    write = (
        f"    {'async ' if aio else ''}def write(self, name: str, /, **params: Any) -> Any:\n"
        '        """The one write operation (the subclass answers it)."""\n'
        "        raise NotImplementedError\n"
    )
    body = "\n".join([write, *(write_method(s, run=run, aio=aio) for s in specs)])
    return f'\n\nclass {name}:\n    """{doc}"""\n\n{body}'


def render_writes(aio: bool) -> str:
    """The writes module's text, formatted as ``ruff format`` leaves it."""
    specs = list(WRITES.values())
    prefix = "Async" if aio else ""
    graph, run = f"{prefix}CatalogueWrites", f"{prefix}RunWrites"
    kind = "awaitable " if aio else ""
    text = _WRITES_HEADER.format(
        doc=f"Every catalogued write as a typed {kind}method over ``write``, for graphs and runs.",
        names=f'"{graph}", "{run}"',
    )
    text += _write_class(
        graph,
        f"Each write of the catalogue as a typed {kind}method: ``write(name, ...)``.",
        specs,
        run=False,
        aio=aio,
    )
    text += _write_class(
        run,
        f"Each write a run offers as a typed {kind}method, as the run's agent in its run.",
        [s for s in specs if s.run],
        run=True,
        aio=aio,
    )
    return _format(text)


def modules() -> list[tuple[Path, str]]:
    """Every generated module and its text."""
    return [
        (SYNC, render(False)),
        (ASYNC, render(True)),
        (SYNC_WRITES, render_writes(False)),
        (ASYNC_WRITES, render_writes(True)),
    ]


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
    for path, text in modules():
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
