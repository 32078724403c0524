"""The CLI's read commands are made from the query catalogue: each takes exactly its read's
parameters (arguments for the required ones, options with the catalogue's defaults and help),
and a toy read declared once is a command that converts its values as the catalogue says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from claimgraph.cli.catalogue import CLI_WRITES, RENDERERS, Renderer, add_reads, flag, flags
from claimgraph.cli.main import app
from claimgraph.core.commands import COMMANDS, Domain, Kind, Sender
from claimgraph.core.queries import QUERIES, Param, QuerySpec
from claimgraph.core.writes import WRITES


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


# -- writes -------------------------------------------------------------------------------------

# The client writes with no command of their own: claim is assert/deny; a schema is published
# from a file (schema apply reads and checks it first); runs report blocked reads themselves.
NOT_ON_THE_CLI = {"claim", "publish_schema", "read_blocked"}


def _command(path: str) -> Any:
    cmd: Any = typer.main.get_command(app)
    for part in path.split():
        cmd = cmd.commands[part]
    return cmd


def test_every_cli_write_takes_the_catalogued_parameters() -> None:
    _command("assert")  # the registrations run at import
    assert set(CLI_WRITES.values()) == set(WRITES) - NOT_ON_THE_CLI
    for path, name in CLI_WRITES.items():
        spec, cmd = WRITES[name], _command(path)
        got = {c.name: c for c in cmd.params}
        own = [p for p in spec.params if p.name not in spec.fixed]
        want = {p.keyword for p in own} | {"agent", "command_id", "sign_with", "as_json"}
        want |= {"task"} if spec.task else set()
        want |= {"none_" + p.keyword for p in own if p.cli_none}
        assert set(got) == want, path
        for p in own:
            c = got[p.keyword]
            if p.required and p.positional and not p.cli and (path, p.name) != UPGRADE_TO:
                assert c.param_type_name == "argument" and c.required, (path, p.name)
                continue
            assert c.param_type_name == "option" and tuple(c.opts + c.secondary_opts) == tuple(
                flags(p)
            ), (path, p.name)
            assert p.doc in (c.help or ""), (path, p.name)
            if p.required and not p.cli_none and (path, p.name) != UPGRADE_TO:
                assert c.required, (path, p.name)
        admin = got["agent"].default == "admin"
        assert admin == (COMMANDS[spec.command].sender is Sender.ADMIN), path
        assert got["agent"].required == (not admin), path


UPGRADE_TO = ("rules upgrade", "to")  # the CLI's own default: the newest revision


def _cli(data: Path, *args: str) -> tuple[int, Any]:
    """The exit code and the last JSON receipt, or for an error what the CLI says of it."""
    from claimgraph.errors import ClaimgraphError

    r = CliRunner().invoke(app, ["--data", str(data), *args, "--json"])
    if isinstance(r.exception, ClaimgraphError):  # main() prints it and exits with its code
        return r.exception.exit_code, str(r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), r
    assert r.exit_code in (0, 1), r
    return r.exit_code, json.loads(r.stdout.splitlines()[-1])


def test_a_cli_write_records_what_the_sdk_records(tmp_path: Path) -> None:
    """Every option of assert, given on the command line, lands in the claim as the same
    parameter given to the SDK does; resolve, erase and key register convert as declared."""
    import claimgraph
    from tests.conftest import SCHEMA

    d = tmp_path / "d"
    with claimgraph.open(d, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
    args = ["--confidence", "0.5", "-e", "cmdb#1", "--evidence", "ticket-9", "--reasoning",
            "seen in the CMDB", "--asserted-at", "2026-01-01T00:00:00Z", "--based-on", "0",
            "--prop", "region=eu", "--prop", "tier=1"]  # fmt: skip
    node = ["owns", "service:checkout", "database:orders"]
    env = ["--agent", "inventory", "--task", "t"]
    code, r = _cli(d, "assert", *node, *env, *args, "--id", "cli-1")
    assert code == 0 and r["kind"] == "accepted", r
    with claimgraph.open(d) as g:
        sdk = g.assert_(
            "owns",
            "service:checkout",
            "database:orders-2",  # another slot: the based-on version is not stale there
            agent="inventory",
            task="t",
            confidence=0.5,
            evidence=["cmdb#1", "ticket-9"],
            reasoning="seen in the CMDB",
            asserted_at="2026-01-01T00:00:00Z",
            based_on_version=0,
            properties={"region": "eu", "tier": "1"},
            command_id="sdk-1",
        )
        assert sdk.kind == "accepted", sdk.decision
        a, b = g.claim_info("cli-1"), g.claim_info("sdk-1")
    differ = {k for k in a if a[k] != b[k]}
    assert differ <= {"claim_id", "version", "command_id", "since", "offset", "object_id"}, (a, b)
    assert a["evidence"] == ["cmdb#1", "ticket-9"] and a["properties"] == {
        "region": "eu",
        "tier": "1",
    }

    # a denial by another writer opens a conflict; resolve takes exactly one of its two forms
    code, r = _cli(d, "deny", *node, "--agent", "dba", "--task", "audit-1", "--id", "cli-2")
    assert r["kind"] == "quarantined", r
    cf = r["conflict_id"]
    code, r = _cli(d, "resolve", cf, "--agent", "reviewer")
    assert code == 4 and "exactly one of --winner or --reject-all" in r
    code, r = _cli(d, "resolve", cf, "--agent", "reviewer", "--winner", "cli-1", "--reject-all")
    assert code == 4 and "exactly one of --winner or --reject-all" in r
    code, r = _cli(d, "resolve", cf, "--agent", "reviewer", "--reject-all")
    assert code == 0 and r["kind"] == "resolved", r
    assert sorted(r["dismissed"]) == ["cli-1", "cli-2"] and r["released"] == [], r

    # erase sends one command per claim id; a bad id is a rejection and exit 1
    code, r = _cli(d, "erase", "cli-1", "no-such-claim", "--reason", "request 7")
    assert code == 1 and r["kind"] == "rejected", r
    with claimgraph.open(d) as g:
        assert g.claim_info("cli-1")["evidence"] == []

    code, r = _cli(d, "key", "register", "k1", "not-hex", "--for", "*")
    assert code == 4 and "public_key must be hex" in r
    code, r = _cli(d, "assert", *node, *env, "--prop", "novalue")
    assert code == 4 and "--prop 'novalue': expected key=value" in r
