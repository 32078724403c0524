"""The CLI's read commands are made from the query catalogue: each takes exactly its read's
parameters (arguments for the required ones, options with the catalogue's defaults and help),
and a toy read declared once is a command that converts its values as the catalogue says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from claimgraph.cli.catalogue import RENDERERS, Renderer, add_reads, flag
from claimgraph.cli.main import app
from claimgraph.core.commands import Domain, Kind
from claimgraph.core.queries import QUERIES, Param, QuerySpec


def _commands(root: typer.Typer) -> dict[str, Any]:
    group = typer.main.get_command(root)
    return dict(group.commands)  # type: ignore[attr-defined]


def test_every_cli_read_takes_the_catalogued_parameters() -> None:
    commands = _commands(app)
    for spec in (s for s in QUERIES.values() if s.cli):
        cmd = commands[spec.cli]
        optional = RENDERERS[spec.name].optional
        got = {p.name: p for p in cmd.params}
        want = {p.keyword for p in spec.params} | {"as_json"}
        want |= {"at"} if spec.versioned else set()
        want |= {"wait"} if spec.waits else set()
        assert set(got) == want, spec.cli
        for p in spec.params:
            c = got[p.keyword]
            if p.required:
                assert c.param_type_name == "argument", (spec.cli, p.name)
                assert c.required == (p.name not in optional), (spec.cli, p.name)
                continue
            assert c.param_type_name == "option" and c.opts == [flag(p)], (spec.cli, p.name)
            assert c.help and (p.doc in c.help), (spec.cli, p.name)
            if not p.switch and p.domain.kind is not Kind.LIST and not p.time:
                assert c.default == p.default, (spec.cli, p.name)


TOY = QuerySpec(
    "toy",
    "A toy read.",
    (
        Param("thing", Domain(Kind.ID, 64), doc="What to read.", node=True, positional=True),
        Param("count", Domain(Kind.INT, lo=1, hi=9), 2, "How many."),
        Param(
            "side",
            Domain(Kind.ENUM, values=("left", "right")),
            "left",
            "Which side.",
            cli="--right",
            switch=True,
        ),
        Param("since", Domain(Kind.INT, nullable=True), None, "From when.", time=True),
        Param("tags", Domain(Kind.LIST, 4, item=Domain(Kind.ID, 8)), None, "Tags.", cli="--tag"),
        Param("closed", Domain(Kind.BOOL), False, "Closed ones too."),
    ),
    "dict[str, Any]",
    "/v1/toy",
    cli="toy",
)


def test_a_toy_read_declared_once_is_a_command(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def render(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
        seen.append({**q, "at": at, "wait": wait, "json": as_json, "graph": g.name})
        print(json.dumps(seen[-1]))

    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """A root for the toy."""

    assert add_reads(root, {"toy": TOY}, {"toy": Renderer(render, "Read a toy.")}) == ["toy"]
    runner = CliRunner()
    helped = runner.invoke(root, ["toy", "--help"], env={"COLUMNS": "200"})
    assert helped.exit_code == 0, helped.output
    for text in (
        "--count",
        "--right",
        "--since",
        "--tag",
        "--closed",
        "--at",
        "How many",
    ):
        assert text in helped.output, text

    import claimgraph
    from claimgraph.cli.common import CTX

    claimgraph.open(tmp_path / "d", create=True).close()
    old = CTX.data
    CTX.data = tmp_path / "d"
    try:
        r = runner.invoke(root, ["toy", "a:b"])
        assert r.exit_code == 0, r.output
        r = runner.invoke(
            root,
            ["toy", "a:b", "--count", "3", "--right", "--since", "2026-01-01T00:00:00Z",
             "--tag", "x", "--tag", "y", "--closed", "--at", "0", "--json"],
        )  # fmt: skip
        assert r.exit_code == 0, r.output
    finally:
        CTX.data = old
    base, full = seen
    assert base == {
        "thing": "a:b", "count": 2, "side": "left", "since": None, "tags": None,
        "closed": False, "at": None, "wait": 0.0, "json": False, "graph": base["graph"],
    }  # fmt: skip
    assert full | {"graph": None} == {
        "thing": "a:b", "count": 3, "side": "right", "since": 1767225600000,
        "tags": ["x", "y"], "closed": True, "at": 0, "wait": 0.0, "json": True, "graph": None,
    }  # fmt: skip


def test_a_read_with_no_printer_is_refused_at_startup() -> None:
    root = typer.Typer()
    try:
        add_reads(root, {"toy": TOY}, {})
    except AssertionError as exc:
        assert "no @renders" in str(exc)
    else:
        raise AssertionError("a catalogued CLI read without a printer was accepted")
