"""`claimgraph tools`: tool definitions from the MCP tools' signatures, checked with the
vendors' own SDK types (openai, anthropic) and JSON Schema's meta-schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter
from typer.testing import CliRunner

from claimgraph.cli.main import app
from claimgraph.core.commands import COMMANDS
from claimgraph.mcp.toolspec import FORMATS, tool_definitions


def _cli(fmt: str) -> list[dict[str, Any]]:
    r = CliRunner().invoke(app, ["tools", "--format", fmt])
    assert r.exit_code == 0, r.output
    out: list[dict[str, Any]] = json.loads(r.output)
    return out


def test_openai_definitions_are_chat_completion_tools() -> None:
    """Every definition validates as openai's ChatCompletionToolParam, keys and all."""
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.shared_params import FunctionDefinition

    tools = _cli("openai")
    TypeAdapter(list[ChatCompletionToolParam]).validate_python(tools, strict=True)
    for t in tools:
        assert set(t) <= set(ChatCompletionToolParam.__annotations__)
        assert set(t["function"]) <= set(FunctionDefinition.__annotations__)
        Draft202012Validator.check_schema(t["function"]["parameters"])


def test_anthropic_definitions_are_tool_params() -> None:
    """Every definition validates as anthropic's ToolParam, keys and all."""
    from anthropic.types import ToolParam

    tools = _cli("anthropic")
    TypeAdapter(list[ToolParam]).validate_python(tools)
    for t in tools:
        assert set(t) <= set(ToolParam.__annotations__)
        assert t["input_schema"]["type"] == "object"


def test_tools_come_from_signatures_and_never_take_an_identity() -> None:
    """Parameters are typed and described; no tool takes who the agent is."""
    tools = {t["name"]: t for t in tool_definitions("json-schema")}
    want = {"read_edge", "assert_edge", "deny_edge", "find_paths", "reach", "neighbors"}
    assert want | {"conflicts_near", "escalate_conflict", "start_run", "end_run"} <= set(tools)
    for t in tools.values():
        props = t["input_schema"].get("properties", {})
        assert not {"agent", "ctx", "principal", "token"} & set(props), t["name"]
        assert t["description"] and "\n" not in t["description"]
        for name, p in props.items():
            assert p.get("description"), (t["name"], name)
    conf = tools["assert_edge"]["input_schema"]["properties"]["confidence"]
    assert (conf["minimum"], conf["maximum"]) == (0.0, 1.0)
    assert tools["assert_edge"]["description"].startswith(COMMANDS["claim"].summary)
    assert set(tools["read_edge"]["input_schema"]["required"]) == {
        "edge_type", "subject", "object",
    }  # fmt: skip


def test_an_unknown_format_is_a_usage_error() -> None:
    """--format names one of the formats, or the command exits 2."""
    r = CliRunner().invoke(app, ["tools", "--format", "yaml"])
    assert r.exit_code != 0
    assert set(FORMATS) == {"openai", "anthropic", "json-schema"}
    with pytest.raises(Exception, match="unknown format"):
        tool_definitions("yaml")
