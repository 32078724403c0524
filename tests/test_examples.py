"""examples/: each runs, printing every tool call and its result: the multi-agent loop (OpenAI
Agents SDK over MCP), a LangGraph thread bound to graph versions, the official MCP client as
host."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT


def _example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_agents_hit_a_quarantine_and_one_escalates(tmp_path: Path) -> None:
    """Three agents through MCP: a quarantine, an escalation with its reason, replays."""
    module = _example("agents_quarantine")
    lines: list[str] = []
    res = module.main(tmp_path / "graph", lines.append)
    (esc,) = res["escalations"]
    reason = esc["escalation_reason"]
    assert "Migration of database:orders is blocked" in reason
    assert "inventory-agent says owns(service:checkout -> database:orders)" in reason
    assert {c["agent"] for c in esc["claims"]} == {"inventory-agent", "dba-agent"}
    assert len(res["runs"]) == 3 and all(res["replays"].values())
    assert any(line.startswith("[dba-agent] My claim was quarantined") for line in lines)
    assert any(line.startswith("[sre-agent] Escalated cf:") for line in lines)
    # every tool call is printed, then its result: the scripted turns call 5 tools
    calls = [line for line in lines if " -> " in line]
    results = [line for line in lines if " <- " in line]
    assert len(calls) == len(results) == 5, lines
    assert any(c.startswith("[sre-agent] -> read_slot({") for c in calls), calls
    assert any(r.startswith("[sre-agent] <- read_slot: ") and "unknown" in r for r in results)


def test_a_langgraph_thread_time_travels_to_the_version_it_saw(tmp_path: Path) -> None:
    """Turn 1 reads nothing, a write lands, turn 2 reads it; resumed from turn 1's checkpoint
    the thread reads at turn 1's version again: nothing."""
    lines: list[str] = []
    res = _example("langgraph_versions").main(tmp_path / "graph", lines.append)
    v1, v2, forked = res["versions"]
    assert v2 > v1 == forked
    assert (res["first"]["state"], res["first"]["version"]) == ("absent", v1)
    assert (res["second"]["state"], res["second"]["version"]) == ("present", v2)
    assert (res["forked"]["state"], res["forked"]["version"]) == ("absent", v1)
    assert all(res["replays"].values()) and len(res["replays"]) == 3
    calls = [line for line in lines if line.lstrip().startswith("-> ")]
    results = [line for line in lines if line.lstrip().startswith("<- ")]
    assert len(calls) == len(results) == 3, lines
    assert results[-1].strip().startswith(f"<- read_slot: absent at v{v1}"), results


def test_the_official_mcp_client_hosts_claimgraph_over_stdio(tmp_path: Path) -> None:
    """A stdio session: the tracer is listed no resolver tool, edge types are the schema's,
    reads answer at the run's version, a bad edge type is a recorded rejection, the run
    replays."""
    lines: list[str] = []
    res = _example("mcp_client").main(tmp_path / "graph", lines.append)
    listed = lines[0]
    assert listed.startswith("tools/list: 14 tools:") and "resolve_conflict" not in listed
    assert res["edge_types"] == ["depends_on"]
    (run,) = res["start_run"]
    first, other = res["read_edge"]
    assert first["state"] == "absent" and first["version"] == run["pinned_version"]
    assert other["version"] == run["pinned_version"]  # after the write: still the pinned one
    (claimed,) = res["assert_edge"]
    assert claimed["decision"] == "accepted"
    assert res["claim"]["based_on_version"] == run["pinned_version"]
    (denied,) = res["deny_edge"]
    assert (denied["decision"], denied["reason"]) == ("rejected", "unknown_edge_type"), denied
    assert res["replay"] is True
    calls = [line for line in lines if line.startswith("-> ")]
    results = [line for line in lines if line.startswith("<- ")]
    assert len(calls) == len(results) == 6, lines
