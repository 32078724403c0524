"""Audit and verify over ranges of versions: a difference is found exactly where it is, and a
range that does not contain it passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocksdict import WriteBatch

import claimgraph
from claimgraph.errors import ConfigError, IntegrityError
from claimgraph.projections.rows import EDGE, dumps, entity_key
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA


def _graph(path: Path) -> Graph:
    g = claimgraph.open(path, create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    for i in range(30):
        g.assert_("depends_on", f"service:s{i % 6}", f"service:t{i % 4}", agent="inventory")
    return g


def test_audit_finds_a_tampered_row_only_in_ranges_that_contain_it(tmp_path: Path) -> None:
    """A row changed at version t: audit of [0, t-1] passes; --at t and the full audit name t."""
    g = _graph(tmp_path / "g")
    try:
        t = 12
        d = g.decisions(t, 1)[0][1]
        c = d["claim"]
        assert c is not None
        key = "\x1f".join(
            (c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"])
        )
        g.projection.db.put(entity_key(EDGE, key, t), dumps(["absent", None, []]))
        assert audit(g, start=0, end=t - 1).head == t - 1
        with pytest.raises(IntegrityError, match=f"version {t}") as e1:
            audit(g, start=t, end=t)
        assert e1.value.version == t
        with pytest.raises(IntegrityError) as e2:
            audit(g)
        assert e2.value.version == t
    finally:
        g.close()


def test_verify_finds_a_tampered_decision_in_its_range(tmp_path: Path) -> None:
    """A decision record changed at version t: verify of a range after t passes (it is given
    the log before it), a range containing t fails there."""
    g = _graph(tmp_path / "g")
    try:
        t = 9
        rec = g.logs.decisions.get(t)
        assert rec is not None
        tampered = rec.value.replace(b"inventory", b"inventorx", 1)
        assert tampered != rec.value
        wb = WriteBatch(raw_mode=True)  # overwrite the record in place (embedded log layout)
        wb.put(b"D" + t.to_bytes(8, "big"), rec.timestamp.to_bytes(8, "big") + tampered)
        g.logs.write(wb)
        rep = verify(g, start=t + 1)
        assert rep.start == t + 1 and rep.decisions == g.head() - t
        with pytest.raises(IntegrityError) as e:
            verify(g, start=t - 2, end=t + 2)
        assert e.value.version == t
        with pytest.raises(IntegrityError):
            verify(g)
        with pytest.raises(ConfigError, match="empty"):
            verify(g, start=5, end=4)
    finally:
        g.close()
