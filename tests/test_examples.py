"""examples/: the multi-agent loop runs (OpenAI Agents SDK, scripted model, MCP)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_agents_hit_a_quarantine_and_one_escalates(tmp_path: Path) -> None:
    """Three agents through MCP: a quarantine, an escalation with its reason, replays."""
    spec = importlib.util.spec_from_file_location(
        "agents_quarantine", ROOT / "examples" / "agents_quarantine.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agents_quarantine"] = module
    spec.loader.exec_module(module)
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
