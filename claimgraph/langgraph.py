"""LangGraph, bound to graph versions: each turn of a thread is a claimgraph run, and the
version it pinned is kept in the thread's state, so every checkpoint records it.

``pip install 'claimgraph[langgraph]'``. Add two nodes and a key to a LangGraph graph::

    from claimgraph.langgraph import GraphState, GraphTools
    from langgraph.prebuilt import tools_condition

    tools = GraphTools(claimgraph.open("data"), agent="release-agent", task="promote")
    model = chat_model.bind_tools(tools.definitions)      # the principal's tools, OpenAI form

    b = StateGraph(GraphState)                             # MessagesState + "claimgraph"
    b.add_node("pin", tools.pin)       # a claimgraph run pinned at head for this turn
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", tools.node)    # the model's tool calls, in the turn's run
    b.add_edge(START, "pin"); b.add_edge("pin", "agent")
    b.add_conditional_edges("agent", tools_condition); b.add_edge("tools", "agent")
    app = b.compile(checkpointer=InMemorySaver())

``pin`` writes ``{"run_id", "version", "snapshot_id"}`` under the state's ``claimgraph`` key;
the checkpointer saves it with every later step. ``node`` runs each tool call of the last AI
message through :class:`~claimgraph.mcp.executor.Executor` (the same tools, checks, roles and
limits as MCP) in that run: reads answer at the pinned version and are traced, writes are based
on it. Resuming a thread, or time-travelling to an earlier checkpoint (``invoke(None,
config_of_that_checkpoint)``), runs the tools at the version the checkpoint recorded: in its run
while this process still holds it, else in a new run joining its snapshot (same version,
traced; the state then names the new run). A turn's ``pin`` ends the run the previous turn of
this ``GraphTools`` pinned; :meth:`GraphTools.close` ends the rest.

One ``GraphTools`` is one principal (``agent`` for a graph in process, or the token's over
``claimgraph.connect``); threads may share it.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from typing import Any, NotRequired

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import MessagesState

from claimgraph.errors import ClaimgraphError, ConfigError
from claimgraph.mcp.executor import Executor
from claimgraph.mcp.server import schema_in_force
from claimgraph.mcp.toolspec import tool_definitions
from claimgraph.service.principals import Principal

__all__ = ["STATE_KEY", "GraphState", "GraphTools", "Pinned"]

STATE_KEY = "claimgraph"
Pinned = dict[str, Any]  # {"run_id", "version", "snapshot_id"}

# Run management is the nodes' own: the model is not offered it.
_RUN_TOOLS = frozenset({"start_run", "end_run", "run_info"})


class GraphState(MessagesState):
    """LangGraph's ``MessagesState`` and the turn's pinned version (``claimgraph``)."""

    claimgraph: NotRequired[Pinned]


class GraphTools:
    """A principal's claimgraph tools as two LangGraph nodes: ``pin`` and ``node``."""

    def __init__(
        self,
        graph: Any,
        principal: Principal | None = None,
        *,
        agent: str | None = None,
        task: str | None = None,
    ) -> None:
        self.executor = Executor(graph, principal, agent=agent, task=task)
        self._lock = threading.Lock()
        self._last: str | None = None  # the run the newest turn pinned
        self._started: list[str] = []  # every run started here, ended by close()
        self._calls = 0

    @property
    def definitions(self) -> list[dict[str, Any]]:
        """The principal's tools in OpenAI's form (for ``bind_tools``), without the run
        tools and the ``run_id`` and ``at`` arguments (the nodes hold the run), with the
        edge and node types of the schema in force at head (read at each access)."""
        schema = schema_in_force(self.executor.session)
        out = []
        for d in tool_definitions("openai", self.executor.principal, schema):
            fn = d["function"]
            if fn["name"] in _RUN_TOOLS:
                continue
            props = dict(fn["parameters"].get("properties", {}))
            props.pop("run_id", None)
            props.pop("at", None)  # the turn's version, not the model's choice
            params = {**fn["parameters"], "properties": props}
            if "required" in params:
                params["required"] = [r for r in params["required"] if r in props]
            out.append({**d, "function": {**fn, "parameters": params}})
        return out

    # -- the nodes ---------------------------------------------------------------------------------

    def pin(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Node: start this turn's run at the newest version; its pin goes in the state."""
        scoped = self.executor.session.scoped
        run = scoped.start_run(self.executor.session.task)
        with self._lock:
            previous, self._last = self._last, run.run_id
            self._started.append(run.run_id)
        if previous is not None:
            self._end(previous, "next turn")
        return {STATE_KEY: self._pinned(run)}

    def node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Node: run the last AI message's tool calls in the state's run, at its version."""
        pinned = state.get(STATE_KEY)
        if not pinned:
            raise ConfigError(
                "the state has no pinned version: add the pin node before the agent "
                "(builder.add_node('pin', tools.pin); builder.add_edge(START, 'pin'))"
            )
        run_id = self._live(pinned)
        if run_id != pinned["run_id"]:
            pinned = {**pinned, "run_id": run_id}
        messages = state["messages"]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):
            return {"messages": []}
        out: list[ToolMessage] = []
        for tc in last.tool_calls:
            args = {**tc["args"], "run_id": run_id}
            call = {
                "type": "function",
                "id": tc.get("id") or "",
                "function": {"name": tc["name"], "arguments": json.dumps(args)},
            }
            content = self.executor.call(call)["content"]
            failed = "error" in json.loads(content)
            out.append(
                ToolMessage(
                    content=content,
                    tool_call_id=tc.get("id") or "",
                    name=tc["name"],
                    status="error" if failed else "success",
                )
            )
        update: dict[str, Any] = {"messages": out}
        if pinned is not state.get(STATE_KEY):
            update[STATE_KEY] = pinned
        return update

    # -- runs --------------------------------------------------------------------------------------

    def _live(self, pinned: Mapping[str, Any]) -> str:
        """The run to call the tools in: the pinned one while held here, else a new run on
        its snapshot (the same version)."""
        scoped = self.executor.session.scoped
        if scoped.run_of(pinned["run_id"]) is not None:
            return str(pinned["run_id"])
        run = scoped.start_run(self.executor.session.task, pinned["snapshot_id"])
        if run.version != pinned["version"]:  # the runs log says otherwise: never read elsewhere
            self._end(run.run_id, "wrong version")
            raise ConfigError(
                f"snapshot {pinned['snapshot_id']} is at version {run.version}, the checkpoint "
                f"recorded {pinned['version']}"
            )
        with self._lock:
            self._started.append(run.run_id)
        return run.run_id

    @staticmethod
    def _pinned(run: Any) -> Pinned:
        return {"run_id": run.run_id, "version": run.version, "snapshot_id": run.snapshot_id}

    def _end(self, run_id: str, status: str) -> None:
        with contextlib.suppress(ClaimgraphError):  # ended already (its lease lapsed...)
            self.executor.session.scoped.end_run(run_id, status)

    def close(self) -> None:
        """End the runs started here and the executor's session."""
        with self._lock:
            started, self._started, self._last = self._started, [], None
        for run_id in started:
            if self.executor.session.scoped.run_of(run_id) is not None:
                self._end(run_id, "ok")
        self.executor.close()

    def __enter__(self) -> GraphTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
