"""The write catalogue (claimgraph/core/writes.py) is every surface's one list of a write's
parameters: the generated SDK methods, the HTTP command bodies, the MCP write tools and the
JSON Lines models each take exactly its parameters, with its defaults — and a toy write added
to the catalogue is on the MCP tools without a line written for it."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from claimgraph.core.commands import COMMANDS
from claimgraph.core.queries import REQUIRED
from claimgraph.core.writes import WRITES, WriteSpec
from claimgraph.errors import InputError
from claimgraph.http.bodies import BODIES
from claimgraph.mcp import server as mcp_server
from claimgraph.mcp.session import AgentSession, Identity
from claimgraph.mcp.toolspec import mcp_tools
from claimgraph.service.access import Access
from claimgraph.service.api import GraphWrites
from claimgraph.service.graph import Graph
from claimgraph.service.inputs import CommandIn, parse_command

ENVELOPE = {"agent", "task", "command_id"}
LINE_ENVELOPE = ENVELOPE | {"graph", "type"}


def _default(spec: WriteSpec, name: str) -> object:
    d = spec.param(name).default
    return list(d) if isinstance(d, tuple) else d


def _model_params(model: Any, skip: set[str]) -> dict[str, object]:
    """A pydantic model's fields (minus ``skip``) → default (REQUIRED when it has none)."""
    out: dict[str, object] = {}
    for name, f in model.model_fields.items():
        if name in skip:
            continue
        if f.is_required():
            out[name] = REQUIRED
        else:
            out[name] = f.default_factory() if f.default_factory else f.default
    return out


def _want(spec: WriteSpec, names: Any) -> dict[str, object]:
    return {p.name: (REQUIRED if p.required else _default(spec, p.name)) for p in names}


def test_http_bodies_take_the_catalogued_parameters_and_defaults() -> None:
    bodies = {s.command: s for s in WRITES.values() if s.body}
    assert set(BODIES) == set(bodies)
    for ctype, spec in bodies.items():
        got = _model_params(BODIES[ctype], ENVELOPE | {"dry_run", "what_if"})
        want = _want(spec, spec.params)
        if "properties" in want:  # a map's None stands for an empty one (service.writes)
            want["properties"] = {}
        if ctype == "publish_schema":  # HTTP names where a schema came from (docs: http)
            want["source"] = "<http>"
        assert got == want, ctype


def test_json_lines_take_the_catalogued_parameters_and_defaults() -> None:
    """One model per client command name (``assert`` and ``deny`` are the claim's forms)."""
    from pydantic import TypeAdapter

    mapping = TypeAdapter(CommandIn).json_schema()["discriminator"]["mapping"]
    names = {n for c in COMMANDS.values() if c.client for n in c.client_names}
    assert set(mapping) == names
    for spec in (s for s in WRITES.values() if s.body):
        for name in COMMANDS[spec.command].client_names:
            model = _line_model(name)
            got = _model_params(model, LINE_ENVELOPE)
            want = _want(spec, (p for p in spec.params if p.name != "polarity"))
            assert got == want, name


def _line_model(type_name: str) -> Any:
    from claimgraph.service import inputs

    for model in inputs._LINES.values():
        if type_name in model.model_fields["type"].annotation.__args__:
            return model
    raise AssertionError(f"no JSON Lines model for {type_name}")


def test_mcp_write_tools_take_the_catalogued_tool_parameters() -> None:
    tools = {t["name"]: t["input_schema"] for t in mcp_tools()}
    for spec in (s for s in WRITES.values() if s.mcp):
        schema = tools[spec.mcp]
        props = schema["properties"]
        assert set(props) == {p.name for p in spec.tool_params} | {"run_id"}, spec.mcp
        required = {p.name for p in spec.tool_params if p.required}
        assert set(schema.get("required", [])) == required, spec.mcp
        for p in spec.tool_params:
            if not p.required:
                assert props[p.name].get("default") == _default(spec, p.name), (spec.mcp, p.name)
            assert props[p.name].get("description") == p.doc, (spec.mcp, p.name)
    item = tools["write_claims"]["$defs"]["ClaimItem"]["properties"]
    assert set(item) == {p.name for p in WRITES["assert_"].tool_params} | {"polarity"}


def test_the_sdk_write_methods_take_the_catalogued_parameters() -> None:
    for spec in WRITES.values():
        sig = inspect.signature(getattr(GraphWrites, spec.name))
        names = [n for n in sig.parameters if n != "self"]
        own = [p.keyword for p in spec.params]
        assert [n for n in names if n not in ENVELOPE] == own, spec.name
        assert set(names) - set(own) == ENVELOPE - (set() if spec.task else {"task"})
        for p in spec.params:
            if not p.required:
                assert sig.parameters[p.keyword].default == p.default, (spec.name, p.name)


def test_the_generated_write_methods_are_what_the_catalogue_makes() -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    import gen_reads as gen

    for path, text in gen.modules():
        assert path.read_text(encoding="utf-8") == text, f"{path}: regenerate it (gen_reads.py)"


def test_a_line_and_the_sdk_make_the_same_command() -> None:
    """The JSON Lines model and the SDK build each write through the one builder."""
    line = parse_command(
        json.dumps(
            {
                "type": "deny",
                "agent": "a",
                "edge_type": "depends_on",
                "subject": {"type": "service", "id": "x"},
                "object": "service:y",
                "evidence": ["e1"],
                "asserted_at": "2026-01-01T00:00:00Z",
            }
        ),
        "g",
    )
    from claimgraph.service.writes import fields_of

    want = fields_of(
        WRITES["deny"],
        {
            "edge_type": "depends_on",
            "subject": "service:x",
            "obj": "service:y",
            "evidence": ["e1"],
            "asserted_at": 1767225600000,
        },
    )
    assert {k: line[k] for k in want} == want  # type: ignore[literal-required]
    with pytest.raises(InputError, match="winner"):
        parse_command('{"type": "resolve", "agent": "a", "conflict_id": "c"}', "g")
    with pytest.raises(InputError, match="reason"):
        parse_command('{"type": "erase", "agent": "a", "claim_id": "c"}', "g")


def test_a_toy_write_in_the_catalogue_is_an_mcp_tool_that_writes(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write form declared once (here: an assert under another tool name) is a tool with
    the catalogue's parameters, and calling it writes through the session."""
    from dataclasses import replace

    toy = replace(WRITES["assert_"], name="toy_assert", mcp="toy_assert")
    monkeypatch.setitem(WRITES, "toy_assert", toy)  # type: ignore[arg-type]
    monkeypatch.setitem(mcp_server.WRITE_DOCS, "toy_assert", "A toy assert.")
    session = AgentSession(Access(graph).of(Identity("inventory")))
    srv = mcp_server.build_server(lambda ctx: session)

    async def go() -> Any:
        tools = {t.name: t for t in await srv.list_tools()}
        assert tools["toy_assert"].description == "A toy assert."
        props = tools["toy_assert"].inputSchema["properties"]
        assert set(props) == {p.name for p in toy.tool_params} | {"run_id"}
        return await srv.call_tool(
            "toy_assert",
            {"edge_type": "owns", "subject": "service:a", "object": "database:d"},
        )

    out = anyio.run(go)
    text = json.dumps(out, default=str)
    assert "accepted" in text, text
    edge = graph.edge("owns", "service:a", "database:d")
    assert edge.state == "present" and len(edge.claims) == 1, edge
    assert graph.claim_info(edge.claims[0])["agent"] == "inventory"
