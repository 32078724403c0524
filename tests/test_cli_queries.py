"""The command line's queries beyond one hop: paths, reach, filtered neighbors; tools."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import claimgraph
from claimgraph.cli.main import app
from claimgraph.errors import InputError
from tests.conftest import SCHEMA


def _cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def test_paths_reach_and_filtered_neighbors_from_the_cli(tmp_path: Path) -> None:
    """paths/reach print JSON the SDK would return; neighbors filters by writer."""
    data = tmp_path / "g"
    with claimgraph.open(data, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
        g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        g.assert_("depends_on", "service:b", "service:c", agent="tracer")
        d = g.deny("depends_on", "service:b", "service:c", agent="inventory")
        conflict = d.decision["conflict_id"]
    d_ = ["--data", str(data)]
    code, text = _cli(*d_, "paths", "service:a", "service:c", "--json")
    assert code == 0, text
    res = json.loads(text)
    assert [p["state"] for p in res["paths"]] == ["unknown"]
    assert res["unknown"][0]["conflict_id"] == conflict
    code, text = _cli(*d_, "paths", "service:a", "service:c")
    assert code == 0 and f"[unknown: {conflict}]" in text
    code, text = _cli(*d_, "reach", "service:a", "--max-hops", "2", "--json")
    assert [(n["node"], n["certain"]) for n in json.loads(text)["nodes"]] == [
        (["service", "b"], True),
        (["service", "c"], False),
    ]
    code, text = _cli(*d_, "neighbors", "service:b", "--writer", "inventory", "--json")
    assert code == 0 and [n["state"] for n in json.loads(text)["neighbors"]] == ["unknown"]
    code, text = _cli(*d_, "neighbors", "service:a", "--writer", "tracer", "--json")
    assert json.loads(text)["neighbors"] == []
    # errors reach main() as InputError (exit 4): past a documented limit, not a time
    for bad in (["reach", "service:a", "--max-hops", "9"], ["neighbors", "service:a",
                "--after", "yesterday"]):  # fmt: skip
        r = CliRunner().invoke(app, [*d_, *bad])
        assert isinstance(r.exception, InputError) and r.exception.exit_code == 4, r.output
