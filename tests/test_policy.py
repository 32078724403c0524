"""Graph schema validation: every kind of error names the file, the path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimgraph import SchemaError, load_schema_file, parse_schema
from claimgraph.core.model import Cardinality, ConflictPolicy, OnStale
from tests.conftest import ROOT, SCHEMA

GOOD_EDGE = """
  - name: e
    subject: a
    object: b
    writers: [{agent: x}]
    cardinality: many-to-many
    conflict_policy: quarantine
"""


def _doc(
    edge: str = GOOD_EDGE, head: str = "principals: {admins: [root]}\nnode_types: [a, b]\n"
) -> str:
    return head + "edge_types:\n" + edge


def test_shipped_schemas_are_valid() -> None:
    """The example schemas in schemas/graphs parse."""
    files = sorted((ROOT / "schemas" / "graphs").glob("*.yaml"))
    assert files
    for f in files:
        load_schema_file(str(f))


def test_parsed_fields() -> None:
    """A valid document yields typed edge types, defaults included."""
    s = parse_schema(SCHEMA, "conftest")
    e = s.edge_types["runs_in"]
    assert e.cardinality is Cardinality.MANY_TO_ONE
    assert e.conflict_policy is ConflictPolicy.LAST_WRITE_WINS
    assert e.subject_exclusive and not e.object_exclusive
    assert s.edge_types["depends_on"].on_stale is OnStale.REJECT
    assert s.edge_types["scored"].merge_margin == 0.2
    assert s.may_write(e, "release-eu", "promote") and not s.may_write(e, "release", "x")
    assert s.is_admin("admin") and s.is_resolver("reviewer") and not s.is_resolver("x")


CASES = [
    # (document, path in the document, a phrase of the message)
    ("node_types: [a\n", "line 2, column 1", "not valid YAML"),
    ("- just\n- a list\n", "", "expected a mapping"),
    (_doc(head="principals: {admins: [root]}\nnode_types: a\n"), "node_types", "expected a list"),
    (_doc(head="node_types: [a, b]\n"), "principals", "missing"),
    (
        _doc(head="principals: {admins: [root]}\nnode_types: [a, a, b]\n"),
        "node_types[1]",
        "declared twice",
    ),
    (
        _doc(head="principals: {admins: [root]}\nnode_types: [a, '9b']\n"),
        "node_types[1]",
        "not a valid node type name",
    ),
    (
        _doc(GOOD_EDGE.replace("cardinality: many-to-many", "cardinality: one-to-few")),
        "edge_types[0].cardinality",
        "expected one of: one-to-one",
    ),
    (
        _doc(GOOD_EDGE.replace("conflict_policy: quarantine", "conflict_policy: vibes")),
        "edge_types[0].conflict_policy",
        "last-write-wins-with-timestamp",
    ),
    (
        _doc(GOOD_EDGE.replace("object: b", "object: c")),
        "edge_types[0].object",
        "not declared in node_types",
    ),
    (
        _doc(GOOD_EDGE.replace("writers: [{agent: x}]", "writers: []")),
        "edge_types[0].writers",
        "at least one writer",
    ),
    (
        _doc(GOOD_EDGE.replace("writers: [{agent: x}]", "writers: [{task: y}]")),
        "edge_types[0].writers[0]",
        "missing required key 'agent'",
    ),
    (
        _doc(GOOD_EDGE.replace("writers: [{agent: x}]", "writers: [{agent: x, role: y}]")),
        "edge_types[0].writers[0].role",
        "unknown key",
    ),
    (_doc(GOOD_EDGE + "    colour: red\n"), "edge_types[0].colour", "unknown key"),
    (_doc(GOOD_EDGE + "    on_stale: maybe\n"), "edge_types[0].on_stale", "reject"),
    (_doc(GOOD_EDGE + "    on_unknown: guess\n"), "edge_types[0].on_unknown", "halt"),
    (_doc(GOOD_EDGE + "    domain: payment\n"), "edge_types[0].fallback", "needs a fallback value"),
    (
        _doc(GOOD_EDGE + "    fallback: {mode: fail_closed}\n"),
        "edge_types[0].fallback.value",
        "needs the value",
    ),
    (_doc(GOOD_EDGE + "    merge: {margin: 2}\n"), "edge_types[0].merge.margin", "[0, 1]"),
    (_doc(GOOD_EDGE + GOOD_EDGE), "edge_types[1].name", "declared twice"),
    (
        _doc(GOOD_EDGE.replace("    subject: a\n", "")),
        "edge_types[0]",
        "missing required key 'subject'",
    ),
]


@pytest.mark.parametrize(("doc", "path", "phrase"), CASES)
def test_each_error_kind_is_precise(doc: str, path: str, phrase: str) -> None:
    """The error names the file, the path inside the document and what was expected."""
    with pytest.raises(SchemaError) as e:
        parse_schema(doc, "bad.yaml")
    assert e.value.source == "bad.yaml"
    report = e.value.report()
    assert report.startswith("bad.yaml")
    assert any(p == path and phrase in m for p, m in e.value.problems), report


def test_all_problems_are_reported_at_once() -> None:
    """Several mistakes give several problems, not just the first."""
    bad = _doc(
        GOOD_EDGE.replace("cardinality: many-to-many", "cardinality: x").replace(
            "conflict_policy: quarantine", "conflict_policy: y"
        )
    )
    with pytest.raises(SchemaError) as e:
        parse_schema(bad, "bad.yaml")
    assert len(e.value.problems) == 2
    assert "and 1 more" in str(e.value)


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing or non-UTF-8 file is a SchemaError naming the file."""
    with pytest.raises(SchemaError, match="cannot read"):
        load_schema_file(str(tmp_path / "missing.yaml"))
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"node_types: [\xe9]\n")
    with pytest.raises(SchemaError, match="not UTF-8"):
        load_schema_file(str(p))


def test_oversized_document() -> None:
    """Documents above the size limit are refused before parsing."""
    with pytest.raises(SchemaError, match="larger than"):
        parse_schema("#" * (300 * 1024))
