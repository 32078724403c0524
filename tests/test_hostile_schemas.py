"""Hostile schema documents are recorded rejections, decided in bounded work (issue 11.1, 11.6).

The inputs are data (tests/data/hostile_schemas.json): an alias bomb, deep nesting, a
recursive alias, too many aliases, an 18 KB CEL rule, a CEL rule nested 40 deep. Each one,
published by anyone, becomes one ``rejected`` decision; verify and audit pass after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.schema import parse_schema
from claimgraph.errors import SchemaError
from claimgraph.service.audit import audit, verify
from tests.conftest import ROOT, SCHEMA
from tests.legacy import restore

CASES: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "hostile_schemas.json").read_text())[
    "cases"
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_hostile_schema_is_refused_with_its_bound(name: str) -> None:
    """Parsing under the newest rules names the bound the document broke."""
    with pytest.raises(SchemaError, match=CASES[name]["expect"]):
        parse_schema(CASES[name]["document"], name, rules=2)


def test_hostile_schemas_are_recorded_rejections_and_the_graph_lives_on(tmp_path: Path) -> None:
    """As the first schema, from a stranger, from an admin: one rejection each; then verify."""
    with claimgraph.open(tmp_path / "g", create=True, graph="t") as g:
        for name, case in sorted(CASES.items()):
            r = g.publish_schema(case["document"], agent="nobody", source=name)
            assert (r.kind, r.reason) == ("rejected", "invalid_schema"), (name, r.decision)
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        for name, case in sorted(CASES.items()):
            stranger = g.publish_schema(case["document"], agent="nobody", source=name)
            # authority is checked before a byte of a stranger's document is parsed
            assert stranger.reason == "not_admin", name
            admin = g.publish_schema(case["document"], agent="admin", source=name)
            assert admin.reason == "invalid_schema" and case["expect"] in admin.decision["detail"]
        assert g.edge("owns", "service:a", "database:d").state == "absent"
        assert g.assert_("owns", "service:a", "database:d", agent="inventory").kind == "accepted"
        verify(g)
        audit(g, samples=2)


def test_a_revision_1_graph_refuses_the_bomb_too(tmp_path: Path) -> None:
    """A graph still on rules revision 1 keeps its order (parse, then authority) but within the
    catastrophe bounds: the bomb that bricked it is a recorded rejection."""
    with claimgraph.open(restore(tmp_path / "g", "inventory")) as g:
        r = g.publish_schema(CASES["alias_bomb"]["document"], agent="nobody")
        assert (r.decision["rules"], r.kind, r.reason) == (1, "rejected", "invalid_schema")
        assert "1000000 YAML nodes" in r.decision["detail"]
        verify(g)


def test_schema_check_reports_the_bound(tmp_path: Path) -> None:
    """`claimgraph schema check` refuses a bomb with exit 3 and the bound it broke."""
    path = tmp_path / "bomb.yaml"
    path.write_text(CASES["alias_bomb"]["document"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "schema", "check", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 3 and "20000 YAML nodes" in r.stderr
