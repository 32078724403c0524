"""Run a model's tool calls without an MCP host: one call in, one vendor-shaped result out.

A host that drives a model itself (``claimgraph tools`` gave the model its definitions) hands
each tool call the model made to :class:`Executor`, which runs it through the very MCP tools —
the same argument checks, sessions, runs, limits and refusals as any MCP client meets — over
any graph the SDK opens (embedded, Kafka, or ``claimgraph.connect`` to a served one) — and
answers in the shape the vendor expects back:

* OpenAI Chat Completions ``{"id", "type": "function", "function": {"name", "arguments"}}``
  → ``{"role": "tool", "tool_call_id", "content"}``;
* OpenAI Responses ``{"type": "function_call", "call_id", "name", "arguments"}`` →
  ``{"type": "function_call_output", "call_id", "output"}``;
* Anthropic Messages ``{"type": "tool_use", "id", "name", "input"}`` →
  ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``.

A tool's failure (a bad argument, a refusal, an unknown tool, arguments that are not JSON) is a
result the model can read, reason code first — never an exception in the host's loop. Arguments
are parsed within the service's JSON bounds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
from mcp.server.fastmcp.exceptions import ToolError

from claimgraph.errors import ClaimgraphError, ConfigError
from claimgraph.mcp.server import build_server, reason_of
from claimgraph.mcp.session import AgentSession
from claimgraph.service.access import Access
from claimgraph.service.bounded import loads
from claimgraph.service.principals import Principal

__all__ = ["Executor", "ToolCall"]


class ToolCall:
    """One tool call as a vendor sent it: its format, id, tool name and arguments."""

    __slots__ = ("arguments", "fmt", "id", "name")

    def __init__(self, fmt: str, id: str, name: str, arguments: Any) -> None:
        self.fmt, self.id, self.name, self.arguments = fmt, id, name, arguments

    @classmethod
    def parse(cls, call: Mapping[str, Any]) -> ToolCall:
        """Recognise an OpenAI (chat or responses) or Anthropic tool call; ``arguments`` stays
        raw (a JSON text or an object) until :meth:`args`."""
        if not isinstance(call, Mapping):
            raise ConfigError(f"a tool call is an object, not {type(call).__name__}")
        kind = call.get("type")
        if kind == "tool_use":
            return cls(
                "anthropic",
                str(call.get("id", "")),
                str(call.get("name", "")),
                call.get("input", {}),
            )
        if kind == "function_call":
            return cls(
                "responses",
                str(call.get("call_id", "")),
                str(call.get("name", "")),
                call.get("arguments", "{}"),
            )
        fn = call.get("function")
        if kind == "function" and isinstance(fn, Mapping):
            return cls(
                "chat", str(call.get("id", "")), str(fn.get("name", "")), fn.get("arguments", "{}")
            )
        raise ConfigError(
            "not a tool call: expected OpenAI's {type: function, function: {...}} or "
            "{type: function_call, ...}, or Anthropic's {type: tool_use, ...}"
        )  # fmt: skip

    def args(self) -> dict[str, Any]:
        raw = self.arguments
        if isinstance(raw, str | bytes):
            raw = loads(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
        if not isinstance(raw, dict):
            raise ToolError(f"invalid_field: {self.name}'s arguments must be a JSON object")
        return raw

    def answer(self, result: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
        """The vendor's result message for this call."""
        text = json.dumps(result if error is None else {"error": error}, ensure_ascii=False)
        if self.fmt == "anthropic":
            content = text if error is None else error
            return {
                "type": "tool_result",
                "tool_use_id": self.id,
                "content": content,
                "is_error": error is not None,
            }
        if self.fmt == "responses":
            return {"type": "function_call_output", "call_id": self.id, "output": text}
        return {"role": "tool", "tool_call_id": self.id, "content": text}


class Executor:
    """The MCP tools of one principal over ``graph``, called from a host's own loop.

    ``principal`` defaults to the served graph's own (``whoami`` of ``claimgraph.connect``);
    over a graph opened in process give ``agent`` (the trusted local owner, as ``claimgraph
    mcp --agent``) or a :class:`Principal`. ``task`` is the session's task, as ``--task``.
    """

    def __init__(
        self,
        graph: Any,
        principal: Principal | None = None,
        *,
        agent: str | None = None,
        task: str | None = None,
        access: Access | None = None,
    ) -> None:
        if principal is None:
            if hasattr(graph, "whoami"):
                who = graph.whoami()
                principal = Principal(
                    who["agent"], tuple(who["tasks"]), frozenset(who["roles"]), "server"
                )
            elif agent is not None:
                principal = Principal(agent, ("*",), frozenset(), "local-owner")
            else:
                raise ConfigError("who calls? give agent= (a graph in process) or a principal")
        self._own_access = access is None
        self.access = access or Access(graph)
        self.session = AgentSession(self.access.of(principal), task=task)
        self._server = build_server(lambda ctx: self.session)

    @property
    def principal(self) -> Principal:
        return self.session.identity

    async def acall(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool call; its result message in the call's vendor format."""
        tc = ToolCall.parse(call)
        try:
            args = tc.args()
            out = await self._server._tool_manager.call_tool(
                tc.name, args, context=self._server.get_context(), convert_result=False
            )
        except ToolError as exc:
            return tc.answer(None, _untagged(str(exc), tc.name))
        except ClaimgraphError as exc:  # the arguments' JSON was out of bounds
            return tc.answer(None, f"{reason_of(exc)}: {exc}")
        return tc.answer(out if isinstance(out, dict) else {"result": out}, None)

    def call(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`acall` from synchronous code (not from inside a running event loop)."""
        result: dict[str, Any] = anyio.run(self.acall, call)
        return result

    def close(self) -> None:
        """End the session's runs (and the access it made)."""
        self.session.close()
        if self._own_access:
            self.access.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _untagged(text: str, tool: str) -> str:
    """A tool error's text without the SDK's ``Error executing tool NAME:`` before it."""
    return text.removeprefix(f"Error executing tool {tool}: ")
