"""Tool definitions for model hosts, derived from the MCP tools' signatures (one declaration).

``claimgraph tools --format openai|anthropic|json-schema`` prints them. The MCP SDK derives
each tool's input schema from its typed, described parameters (:mod:`claimgraph.mcp.server`);
this module only reshapes that list for each vendor's tool format:

* ``openai`` — Chat Completions ``tools``: ``{"type": "function", "function": {...}}``;
* ``anthropic`` — Messages ``tools``: ``{"name", "description", "input_schema"}``;
* ``json-schema`` — ``{"name", "description", "input_schema"}`` with plain JSON Schema.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio

from claimgraph.core.schema import GraphSchema
from claimgraph.errors import ConfigError
from claimgraph.mcp.server import build_server, offered, shaped
from claimgraph.service.principals import Principal

__all__ = ["FORMATS", "mcp_tools", "tool_definitions"]

FORMATS = ("openai", "anthropic", "json-schema")
Format = Literal["openai", "anthropic", "json-schema"]


def _no_session(ctx: Any) -> Any:
    raise ConfigError("tool definitions are listed without a graph; nothing is called")


def mcp_tools(
    principal: Principal | None = None, schema: GraphSchema | None = None
) -> list[dict[str, Any]]:
    """The MCP server's tools as (name, description, input schema): those offered to
    ``principal`` (its roles decide; a local owner's, ``schema``'s principals), or every
    tool; with ``schema``, its edge and node types in the input schemas."""

    async def go() -> list[dict[str, Any]]:
        tools = await build_server(_no_session).list_tools()
        return [
            {
                "name": t.name,
                "description": t.description or "",
                "input_schema": t.inputSchema if schema is None else shaped(t.inputSchema, schema),
            }
            for t in tools
            if offered(t.name, principal, schema)
        ]

    return anyio.run(go)


def tool_definitions(
    fmt: str, principal: Principal | None = None, schema: GraphSchema | None = None
) -> list[dict[str, Any]]:
    """Every tool (or those offered to ``principal``) in one vendor's format (see the module
    docstring), shaped by ``schema`` when given."""
    tools = mcp_tools(principal, schema)
    if fmt == "openai":
        return [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            }
            for t in tools
        ]
    if fmt in ("anthropic", "json-schema"):
        return tools
    raise ConfigError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
