"""The GC policy around a batch of decisions: thresholds restored, survivors frozen, no cycles."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import claimgraph
from claimgraph.streams import gcbatch
from claimgraph.streams.gcbatch import GEN0_BATCH, batch_gc
from tests.conftest import SCHEMA


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_thresholds_are_raised_inside_and_restored_after() -> None:
    """Inside a batch the young threshold is GEN0_BATCH; after it (and after a failed one)
    the thresholds are what they were."""
    before = gc.get_threshold()
    with batch_gc():
        assert gc.get_threshold() == (max(GEN0_BATCH, before[0]), *before[1:])
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), batch_gc():
        raise RuntimeError("the batch failed")
    assert gc.get_threshold() == before


def test_a_batch_s_survivors_are_frozen() -> None:
    """What a batch keeps is moved to the permanent generation at its end."""
    kept: list[Node] = []
    with batch_gc():
        kept.append(Node())
        frozen_before = gc.get_freeze_count()
    assert gc.get_freeze_count() > frozen_before


def test_batches_make_no_cycles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deciding, folding and projecting claims, conflicts (quarantine, last-write-wins),
    a resolution, a retraction and a rejection leaves no cyclic garbage behind at any
    batch's end: freezing the batch without collecting it keeps nothing that is garbage."""
    found: list[int] = []
    freeze = gc.freeze

    def collect_then_freeze() -> None:
        found.append(gc.collect(1))  # what the batch left that only the cyclic GC can free
        freeze()

    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    gc.collect()
    monkeypatch.setattr(gcbatch.gc, "freeze", collect_then_freeze)
    enabled = gc.isenabled()
    gc.disable()  # nothing collects on its own: every cycle a batch makes is counted
    try:
        a = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        g.assert_("owns", "service:a", "database:x", agent="inventory")
        r = g.assert_("owns", "service:b", "database:x", agent="dba", task="audit-q3")
        g.deny("depends_on", "service:a", "service:b", agent="tracer")
        g.retract(a.command_id, agent="inventory")
        g.assert_("depends_on", "service:a", "service:b", agent="nobody-at-all")
        conflict = r.decision["conflict_id"]
        assert r.kind == "quarantined" and conflict is not None
        assert g.resolve(conflict, winner=r.command_id, agent="reviewer").kind == "resolved"
    finally:
        if enabled:
            gc.enable()
        monkeypatch.undo()
    assert len(found) >= 6 and found == [0] * len(found)
    g.close()


def test_writes_leave_the_thresholds_as_they_were(tmp_path: Path) -> None:
    """Writing through the embedded graph (decide, fold, project in batches) leaves the
    process's GC thresholds unchanged."""
    before = gc.get_threshold()
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    frozen = gc.get_freeze_count()
    g.assert_("depends_on", "service:a", "service:b", agent="inventory")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() > frozen  # the write's batch went through batch_gc
    g.close()
