"""``run_id`` on ``retract``, as the command catalogue declares it, on every surface: the SDK
(embedded and over HTTP), the async SDK, a run (sync and async) and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from typer.testing import CliRunner

import claimgraph
from claimgraph.cli.main import app as cli
from claimgraph.core.wire import decode_command
from claimgraph.sdk.aio import AsyncEmbeddedGraph
from claimgraph.service.api import Receipt
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.http_fixtures import SdkFactory, sdk  # noqa: F401  (the fixture)


def _run_of_retract(g: Graph, receipt: Receipt) -> object:
    """The run id the retract ``receipt`` acknowledges carried, read back from the commands
    log (the governor's decision does not copy it)."""
    (rec,) = g.logs.commands.read(receipt.position, 1)
    command = decode_command(rec.value)
    assert command["type"] == "retract" and receipt.decision["command_type"] == "retract"
    return command["run_id"]


def test_retract_carries_its_run_id_over_the_sdk(sdk: tuple[SdkFactory, Graph]) -> None:  # noqa: F811
    """Embedded and over HTTP: ``retract(..., run_id=...)`` is accepted (no 422) and the
    command in the log carries it."""
    as_agent, g = sdk
    client = as_agent("inventory")
    c = client.assert_("depends_on", "service:a", "service:b", agent="inventory")
    r = client.retract(c.command_id, agent="inventory", run_id="run-7", reason="gone")
    assert r.kind != "rejected", r.decision
    assert _run_of_retract(g, r) == "run-7"


def test_runs_and_the_async_sdk_retract_in_their_run(tmp_path: Path) -> None:
    """A run's retract names the run; the async graph's retract takes run_id."""
    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        c = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        with g.run(agent="inventory") as run:
            r = run.retract(c.command_id)
        assert _run_of_retract(g, r) == run.run_id
        c2 = g.assert_("depends_on", "service:a", "service:c", agent="inventory")

        async def go() -> Receipt:
            ag = AsyncEmbeddedGraph(g)
            rec = await ag.retract(c2.command_id, agent="inventory", run_id="run-async")
            return rec

        assert _run_of_retract(g, anyio.run(go)) == "run-async"


def test_cli_retract_takes_a_run(tmp_path: Path) -> None:
    """``claimgraph retract --run`` records the run id."""
    data = tmp_path / "g"
    with claimgraph.open(data, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        cid = g.assert_("depends_on", "service:a", "service:b", agent="inventory").command_id
    out = CliRunner().invoke(
        cli,
        ["--data", str(data), "retract", cid, "--agent", "inventory", "--run", "run-cli", "--json"],
    )
    assert out.exit_code == 0, out.output
    receipt = json.loads(out.output)
    with claimgraph.open(data, graph="test") as g:
        (rec,) = g.logs.commands.read(g.logs.commands.end() - 1, 1)
        assert decode_command(rec.value)["run_id"] == "run-cli"
        assert receipt["kind"] != "rejected"


def test_an_mcp_agent_retracts_in_its_run(tmp_path: Path) -> None:
    """Through a real MCP session on a served graph: retract_claim with the run_id start_run
    returned is decided in that run (the command in the log names it) and traced as the run's
    write; without a run_id it names none."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.http_fixtures import TOKENS
    from tests.mcp_fixtures import result, served

    with served(tmp_path / "g") as (url, g, _sessions):

        async def go() -> tuple[str, dict[str, object], dict[str, object]]:
            headers = {"Authorization": f"Bearer {TOKENS['inventory']}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as client,
                streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
                ClientSession(r, w) as s,
            ):
                await s.initialize()

                async def call(tool: str, **args: object) -> dict[str, object]:
                    return result(await s.call_tool(tool, args))

                run = await call("start_run")
                edge = {"edge_type": "depends_on", "subject": "service:a"}
                a = await call("assert_edge", **edge, object="service:b")
                b = await call("assert_edge", **edge, object="service:c")
                in_run = await call(
                    "retract_claim", claim_id=a["claim_id"], reason="gone", run_id=run["run_id"]
                )
                await call("end_run", run_id=run["run_id"])
                outside = await call("retract_claim", claim_id=b["claim_id"], reason="gone")
                return str(run["run_id"]), in_run, outside

        run_id, in_run, outside = anyio.run(go)
        assert in_run["decision"] == outside["decision"] == "retired", (in_run, outside)
        receipts = {
            v: Receipt(d["command_id"], d["input_offset"], v, d)
            for v, d in g.decisions(0, 100)
            if d["command_type"] == "retract"
        }
        runs = [_run_of_retract(g, r) for _, r in sorted(receipts.items())]
        assert runs == [run_id, None], runs
        writes = [e for e in g.run_events(run_id) if e["kind"] == "write"]
        assert any('"command_type": "retract"' in e["payload"] for e in writes), writes
