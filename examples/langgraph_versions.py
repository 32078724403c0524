"""A LangGraph agent whose turns are claimgraph runs, time-travelled to an earlier checkpoint.

``claimgraph.langgraph`` gives a LangGraph graph two nodes: ``pin`` starts a claimgraph run at
the newest version for each turn and keeps ``{run_id, version, snapshot_id}`` in the thread's
state (so LangGraph's checkpointer records it with every step), and ``tools`` runs the model's
tool calls in that run, at that version. A scripted model (langchain-core's
``GenericFakeChatModel``) stands in for the LLM, so this runs without an API key.

    python examples/langgraph_versions.py     # prints every tool call and its result

1. Turn 1: ``release-agent`` asks where service:checkout runs; nothing is recorded yet.
2. Meanwhile the deploy pipeline records that checkout runs in prod.
3. Turn 2 pins the newer version and reads prod.
4. Time travel: the thread is resumed from turn 1's checkpoint. Its tool call reads the graph
   at the version turn 1 pinned — nothing there — not at head: replaying a step replays what it
   saw.

To use a real model, replace ``GenericFakeChatModel(...)`` by a chat model bound to
``tools.definitions`` (``ChatOpenAI(...).bind_tools(tools.definitions)``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

import claimgraph
from claimgraph.langgraph import STATE_KEY, GraphState, GraphTools

SCHEMA = """
principals: {admins: [platform-admin]}
node_types: [service, environment]
edge_types:
  - name: runs_in              # a service runs in one environment
    subject: service
    object: environment
    writers: [{agent: deploy-pipeline, task: "*"}]
    cardinality: many-to-one
    conflict_policy: last-write-wins-with-timestamp
"""

ASK = {"edge_type": "runs_in", "node": "service:checkout", "direction": "out"}


def script(turns: int) -> Iterator[AIMessage]:
    """The scripted model: each turn reads checkout's environment slot, then answers."""
    for i in range(turns):
        yield AIMessage("", tool_calls=[{"name": "read_slot", "args": ASK, "id": f"call-{i}"}])
        yield AIMessage(f"(answer {i + 1}: see the slot read above)")


def build(tools: GraphTools, model: Any, out: Callable[[str], None]) -> Any:
    """The LangGraph graph: pin → agent ⇄ tools, checkpointed in memory."""

    def agent(state: GraphState) -> dict[str, Any]:
        reply = model.invoke(state["messages"])
        for tc in reply.tool_calls:
            out(f"  -> {tc['name']}({json.dumps(tc['args'])})")
        if not reply.tool_calls:
            out(f"  {reply.content}")
        return {"messages": [reply]}

    def run_tools(state: GraphState) -> dict[str, Any]:
        update = tools.node(state)
        pinned = update.get(STATE_KEY, state[STATE_KEY])
        for m in update["messages"]:
            r = json.loads(m.content)
            out(f"  <- {m.name}: {r.get('state')} at v{r.get('version')} (run {pinned['run_id']})")
        return update

    def pin(state: GraphState) -> dict[str, Any]:
        update = tools.pin(state)
        p = update[STATE_KEY]
        out(f"  pinned v{p['version']} in run {p['run_id']}")
        return update

    b = StateGraph(GraphState)
    b.add_node("pin", pin)
    b.add_node("agent", agent)
    b.add_node("tools", run_tools)
    b.add_edge(START, "pin")
    b.add_edge("pin", "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=InMemorySaver())


def _slot(state: dict[str, Any]) -> dict[str, Any]:
    (last,) = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1:]
    answer: dict[str, Any] = json.loads(last.content)
    return answer


def main(data: Path, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the thread, write between its turns, time-travel it; return what it read."""
    with claimgraph.open(data, create=True, graph="example") as g:
        g.publish_schema(SCHEMA, agent="platform-admin", source="examples/langgraph_versions")
        with GraphTools(g, agent="release-agent", task="promote") as tools:
            app = build(tools, GenericFakeChatModel(messages=script(3)), out)
            thread = {"configurable": {"thread_id": "release-1"}}
            out("turn 1: where does checkout run?")
            first = app.invoke({"messages": [HumanMessage("Where does checkout run?")]}, thread)
            w = g.assert_(
                "runs_in", "service:checkout", "environment:prod", agent="deploy-pipeline"
            )
            out(f"deploy-pipeline: runs_in(service:checkout -> environment:prod) at v{w.version}")
            out("turn 2: and now?")
            second = app.invoke({"messages": [HumanMessage("And now?")]}, thread)
            v1 = first[STATE_KEY]["version"]
            back = next(
                s
                for s in app.get_state_history(thread)
                if s.next == ("agent",) and s.values.get(STATE_KEY, {}).get("version") == v1
            )
            checkpoint = back.config["configurable"]["checkpoint_id"]
            out(f"time travel: back to turn 1's checkpoint {checkpoint}")
            forked = app.invoke(None, back.config)
        replays = {
            r[STATE_KEY]["run_id"]: g.replay_run(r[STATE_KEY]["run_id"]).identical
            for r in (first, second, forked)
        }
    out(f"runs replay identically: {all(replays.values())}")
    return {
        "first": _slot(first),
        "second": _slot(second),
        "forked": _slot(forked),
        "versions": [r[STATE_KEY]["version"] for r in (first, second, forked)],
        "replays": replays,
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        res = main(Path(d) / "graph")
    sys.exit(0 if res["forked"]["holds"] == [] and all(res["replays"].values()) else 1)
