"""Each principal is offered only the tools its roles allow (issue: tools shaped by the
principal): over /mcp a writer's tools/list has no resolver tool and a resolver's has them;
called anyway, a hidden tool is refused by the service and the refusal is recorded;
``claimgraph tools --for/--role`` prints the same sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio

from claimgraph.core.writes import WRITES
from claimgraph.mcp.server import TOOL_COMMANDS, offered
from claimgraph.mcp.toolspec import mcp_tools
from claimgraph.service.principals import Principal
from claimgraph.service.scoped import role_for
from tests.mcp_fixtures import served
from tests.test_transports import _call, _opener

ROOT = Path(__file__).resolve().parent.parent
RESOLVER_TOOLS = {"resolve_conflict", "escalate_conflict"}


def test_the_tools_needing_a_role_are_the_resolver_ones() -> None:
    """Derived from the commands' senders, not listed by hand: the two resolver moves."""
    needing = {t for t, c in TOOL_COMMANDS.items() if role_for(c) is not None}
    assert needing == RESOLVER_TOOLS
    assert set(TOOL_COMMANDS) == {s.mcp for s in WRITES.values() if s.mcp} | {"write_claims"}
    writer, owner = Principal("w"), Principal("o", how="local-owner")
    assert not any(offered(t, writer) for t in RESOLVER_TOOLS)
    assert all(offered(t, owner) for t in RESOLVER_TOOLS)  # trusted: the governor judges
    every = {t["name"] for t in mcp_tools()}
    assert {t["name"] for t in mcp_tools(writer)} == every - RESOLVER_TOOLS
    assert {t["name"] for t in mcp_tools(Principal("r", roles=frozenset({"resolver"})))} == every


def test_over_mcp_a_writer_is_not_offered_resolver_tools_and_is_refused_them(
    tmp_path: Path,
) -> None:
    with served(tmp_path / "g") as (url, g, _sessions):
        open_ = _opener(url)

        async def go() -> tuple[set[str], set[str], dict[str, object]]:
            async with open_("inventory") as writer, open_("reviewer") as resolver:
                mine = {t.name for t in (await writer.list_tools()).tools}
                theirs = {t.name for t in (await resolver.list_tools()).tools}
                refused = await _call(writer, "escalate_conflict", conflict_id="cf-x")
            return mine, theirs, refused

        mine, theirs, refused = anyio.run(go)
        assert not mine & RESOLVER_TOOLS and "assert_edge" in mine
        assert theirs >= RESOLVER_TOOLS and mine < theirs
        assert refused["decision"] == "refused" and refused["reason"] == "not_resolver", refused
        recorded = [d for _, d in g.decisions(0, 100) if d["reason"] == "not_resolver"]
        assert recorded and recorded[-1]["agent"] == "inventory"


def _tools(*args: str, data: Path) -> tuple[list[dict[str, object]], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "tools", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_claimgraph_tools_prints_the_set_a_principal_is_offered(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"agent": "writer", "token": "t-writer-0001"},
                    {"agent": "judge", "token": "t-judge-0001", "roles": ["resolver"]},
                ]
            }
        )
    )
    every, _ = _tools(data=tmp_path)
    as_writer, said = _tools("--for", "writer", "--tokens", str(tokens), data=tmp_path)
    as_judge, _ = _tools("--for", "judge", "--tokens", str(tokens), data=tmp_path)
    no_role, _ = _tools("--role", "none", data=tmp_path)
    names = [{str(t["name"]) for t in d} for d in (every, as_writer, as_judge, no_role)]
    assert names[1] == names[3] == names[0] - RESOLVER_TOOLS
    assert names[2] == names[0]
    size = len(json.dumps(as_writer, separators=(",", ":"), ensure_ascii=False).encode())
    assert f"{len(as_writer)} tools for writer (no role): {size:,} bytes" in said, said


def test_tools_carry_the_schemas_types_and_follow_a_new_schema(tmp_path: Path) -> None:
    """edge_type is one of the schema's edge types and a node starts with one of its node
    types, in every tool that takes them (write_claims' items included); publishing a schema
    that adds an edge type changes the next tools/list."""
    from tests.conftest import SCHEMA

    extra = (
        SCHEMA
        + """  - name: audits
    subject: team
    object: service
    writers: [{agent: "*"}]
    cardinality: many-to-many
    conflict_policy: quarantine
"""
    )
    with served(tmp_path / "g") as (url, g, _sessions):
        open_ = _opener(url)

        async def listing() -> dict[str, dict[str, object]]:
            async with open_("inventory") as s:
                return {t.name: t.inputSchema for t in (await s.list_tools()).tools}

        before = anyio.run(listing)
        types = sorted(["owns", "runs_in", "lead_of", "depends_on", "calls", "scored"])
        props = before["assert_edge"]["properties"]
        assert props["edge_type"]["enum"] == types  # type: ignore[index]
        assert props["subject"]["pattern"] == "^(database|environment|service|team):."  # type: ignore[index]
        item = before["write_claims"]["$defs"]["ClaimItem"]["properties"]  # type: ignore[index]
        assert item["edge_type"]["enum"] == types
        paths = before["find_paths"]["properties"]["edge_types"]  # type: ignore[index]
        assert any(a.get("items", {}).get("enum") == types for a in paths["anyOf"]), paths
        assert g.publish_schema(extra, agent="admin").kind == "accepted"
        after = anyio.run(listing)
        assert "audits" in after["assert_edge"]["properties"]["edge_type"]["enum"]  # type: ignore[index]


def test_a_local_owner_is_offered_the_roles_the_schema_gives_it(tmp_path: Path) -> None:
    """A local owner (``claimgraph mcp --agent``) has no roles of its own: its listing follows
    the schema in force — resolver tools only for a schema resolver, before any schema all."""
    import claimgraph
    from claimgraph.mcp.executor import Executor
    from claimgraph.mcp.server import schema_in_force
    from tests.conftest import SCHEMA

    resolver_tools = {t for t, c in TOOL_COMMANDS.items() if role_for(c) == "resolver"}
    assert resolver_tools == {"resolve_conflict", "escalate_conflict"}
    with claimgraph.open(tmp_path / "g", create=True) as g:

        def listed(agent: str) -> set[str]:
            with Executor(g, agent=agent) as ex:
                schema = schema_in_force(ex.session)
                return {t["name"] for t in mcp_tools(ex.principal, schema)}

        assert resolver_tools <= listed("tracer")  # no schema yet: nothing says otherwise
        g.publish_schema(SCHEMA, agent="admin")
        assert not resolver_tools & listed("tracer")
        assert resolver_tools <= listed("reviewer")  # principals.resolvers
        assert resolver_tools <= listed("admin")  # an admin resolves too
        assert "assert_edge" in listed("tracer")


def test_a_session_is_told_its_tool_list_changed_when_a_schema_is_published(
    tmp_path: Path,
) -> None:
    """A session that listed its tools gets notifications/tools/list_changed at its first
    call after a new schema is in force — once per change — and the next listing has the new
    types."""
    from mcp import types
    from mcp.shared.memory import create_connected_server_and_client_session

    import claimgraph
    from claimgraph.mcp.server import build_server
    from claimgraph.mcp.session import AgentSession
    from tests.conftest import SCHEMA

    extra = SCHEMA + (
        "  - name: audits\n    subject: team\n    object: service\n"
        '    writers: [{agent: "*"}]\n    cardinality: many-to-many\n'
        "    conflict_policy: quarantine\n"
    )
    edge = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
    with claimgraph.open(tmp_path / "g", create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
        told: list[str] = []

        async def handler(message: object) -> None:
            if isinstance(message, types.ServerNotification):
                told.append(message.root.method)

        async def go() -> list[str]:
            told.clear()
            session = AgentSession.over(g, Principal("inventory", ("*",), frozenset(), "test"))
            server = build_server(lambda ctx: session)
            async with create_connected_server_and_client_session(
                server, message_handler=handler
            ) as client:
                await client.list_tools()
                await client.call_tool("read_edge", edge)
                assert told == []  # nothing changed yet
                assert g.publish_schema(extra, agent="admin").kind == "accepted"
                await client.call_tool("read_edge", edge)
                await client.call_tool("read_edge", edge)  # the same change: not told again
                tools = {t.name: t for t in (await client.list_tools()).tools}
                enum = tools["assert_edge"].inputSchema["properties"]["edge_type"]["enum"]
                assert "audits" in enum
            return list(told)

        assert anyio.run(go) == ["notifications/tools/list_changed"]


def test_claimgraph_tools_typed_by_a_graphs_schema(tmp_path: Path) -> None:
    """``--typed`` lists what a session of that graph lists: its edge types as an enum."""
    import claimgraph
    from tests.conftest import SCHEMA

    with claimgraph.open(tmp_path, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
    typed, _ = _tools("--typed", data=tmp_path)
    plain, _ = _tools(data=tmp_path)
    by_name = {str(t["name"]): t for t in typed}
    props = by_name["assert_edge"]["input_schema"]["properties"]  # type: ignore[index]
    assert props["edge_type"]["enum"] == sorted(
        ["owns", "runs_in", "lead_of", "depends_on", "calls", "scored"]
    )
    assert "enum" not in json.dumps(
        {str(t["name"]): t for t in plain}["assert_edge"]["input_schema"]["properties"]["edge_type"]  # type: ignore[index]
    )
