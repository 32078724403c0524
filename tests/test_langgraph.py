"""LangGraph bound to graph versions (issue #32): each turn of a thread pins a version in a
claimgraph run, the thread's checkpoints record it, and a thread time-travelled to an earlier
checkpoint reads the graph at the version that checkpoint recorded — never at head.

LangGraph's own parts: its StateGraph, its in-memory checkpointer, langchain-core's
GenericFakeChatModel scripting the model's tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

import claimgraph
from claimgraph.langgraph import STATE_KEY, GraphState, GraphTools
from tests.conftest import SCHEMA

EDGE = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}


def _read_then_answer(n: int) -> Iterator[AIMessage]:
    """The scripted model: each turn reads the edge once, then answers."""
    for i in range(n):
        yield AIMessage("", tool_calls=[{"name": "read_edge", "args": EDGE, "id": f"call-{i}"}])
        yield AIMessage(f"answer {i}")


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Any]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    try:
        yield g
    finally:
        g.close()


def _app(tools: GraphTools, model: Any) -> Any:
    b = StateGraph(GraphState)
    b.add_node("pin", tools.pin)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", tools.node)
    b.add_edge(START, "pin")
    b.add_edge("pin", "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=InMemorySaver())


def _reads(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_a_time_travelled_thread_reads_the_version_its_checkpoint_recorded(graph: Any) -> None:
    model = GenericFakeChatModel(messages=_read_then_answer(3))
    with GraphTools(graph, agent="tracer", task="t") as tools:
        app = _app(tools, model)
        thread = {"configurable": {"thread_id": "t1"}}
        first = app.invoke({"messages": [HumanMessage("does a depend on b?")]}, thread)
        v1 = first[STATE_KEY]["version"]
        assert [(r["state"], r["version"]) for r in _reads(first)] == [("absent", v1)]

        # meanwhile another agent writes the edge: the next turn pins a newer version
        w = graph.assert_("depends_on", "service:a", "service:b", agent="inventory")
        assert w.kind == "accepted" and w.version > v1
        second = app.invoke({"messages": [HumanMessage("and now?")]}, thread)
        v2 = second[STATE_KEY]["version"]
        assert v2 >= w.version and second[STATE_KEY]["run_id"] != first[STATE_KEY]["run_id"]
        assert [(r["state"], r["version"]) for r in _reads(second)][-1] == ("present", v2)

        # every checkpoint of the first turn after its pin recorded v1
        history = list(app.get_state_history(thread))
        turn1 = [
            s
            for s in history
            if s.values.get(STATE_KEY, {}).get("version") == v1 and s.next == ("agent",)
        ]
        assert turn1, [(s.next, s.values.get(STATE_KEY)) for s in history]
        back = turn1[-1]  # the first turn, just after its pin: before it read the edge
        assert not _reads(back.values)

        # time travel: resume there; the edge is read at v1 (absent), not at head (present)
        forked = app.invoke(None, back.config)
        reads = _reads(forked)
        assert [(r["state"], r["version"]) for r in reads] == [("absent", v1)], reads
        assert forked[STATE_KEY]["version"] == v1
        # the first turn's run ended when the second pinned: the fork read in a new run on
        # its snapshot, traced at v1
        run_id = forked[STATE_KEY]["run_id"]
        assert run_id != first[STATE_KEY]["run_id"]
        assert forked[STATE_KEY]["snapshot_id"] == first[STATE_KEY]["snapshot_id"]
    runs = {s.run_id: s for s in graph.runs()}
    assert runs[run_id].pinned_version == v1 and not runs[run_id].live
    reads_traced = [e for e in graph.run_events(run_id) if e["kind"] == "read"]
    assert len(reads_traced) == 1
    for r in (first, second):  # every run of the thread replays identically
        assert graph.replay_run(r[STATE_KEY]["run_id"]).identical


def test_definitions_are_the_principals_tools_with_the_schemas_types(graph: Any) -> None:
    with GraphTools(graph, agent="tracer", task="t") as tools:
        defs = {d["function"]["name"]: d["function"]["parameters"] for d in tools.definitions}
    assert "read_edge" in defs and "assert_edge" in defs
    assert not {"start_run", "end_run", "run_info"} & set(defs)
    for params in defs.values():
        assert "run_id" not in params.get("properties", {})
        assert "at" not in params.get("properties", {})
    edge_type = defs["read_edge"]["properties"]["edge_type"]
    assert "depends_on" in json.dumps(edge_type) and "owns" in json.dumps(edge_type)


def test_a_write_in_a_turn_is_based_on_its_pinned_version(graph: Any) -> None:
    claim = {**EDGE, "evidence": ["trace-1"], "reasoning": "seen in a trace"}
    script = iter(
        [
            AIMessage("", tool_calls=[{"name": "assert_edge", "args": claim, "id": "w-1"}]),
            AIMessage("written"),
        ]
    )
    with GraphTools(graph, agent="tracer", task="t") as tools:
        app = _app(tools, GenericFakeChatModel(messages=script))
        out = app.invoke(
            {"messages": [HumanMessage("record it")]}, {"configurable": {"thread_id": "w"}}
        )
    (answer,) = _reads(out)
    assert answer.get("decision") == "accepted", answer
    record = graph.claim_info(answer["claim_id"])
    assert record["based_on_version"] == out[STATE_KEY]["version"]
    assert record["run_id"] == out[STATE_KEY]["run_id"]


def test_the_tools_node_without_a_pin_says_what_to_add(graph: Any) -> None:
    from claimgraph.errors import ConfigError

    with (
        GraphTools(graph, agent="tracer", task="t") as tools,
        pytest.raises(ConfigError, match="add the pin node"),
    ):
        tools.node({"messages": []})
