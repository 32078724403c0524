"""Checkpoints (embedded runtime): restart from the newest checkpoint plus the log's tail gives
the same graph as a full replay; restore replaces a lost projection; a foreign checkpoint is
never trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import claimgraph
from claimgraph.errors import ConfigError, NotFoundError, StorageError
from claimgraph.projections.checkpoints import checkpoint_graph, list_checkpoints, restore_graph
from claimgraph.service.audit import audit, digest_at, verify
from claimgraph.service.graph import Graph, open_graph
from tests.conftest import SCHEMA

T0 = 1_800_000_000_000


def _write(g: Graph, start: int, n: int) -> None:
    """Claims with fixed ids and event times, so two graphs fed the same calls are equal."""
    for i in range(start, start + n):
        kw = {"asserted_at": T0 + i}
        g.assert_("runs_in", f"service:s{i % 5}", f"environment:e{i % 3}", agent="release",
                  task="promote", command_id=f"r{i}", **kw)  # fmt: skip
        g.assert_("owns", f"service:s{i % 4}", f"database:d{i % 6}", agent="inventory",
                  command_id=f"o{i}", **kw)  # fmt: skip
        if i % 7 == 3:
            g.deny("depends_on", f"service:s{i % 5}", "service:db", agent="tracer",
                   command_id=f"x{i}", **kw)  # fmt: skip
        g.assert_("depends_on", f"service:s{i % 5}", "service:db", agent="inventory",
                  command_id=f"d{i}", **kw)  # fmt: skip


def _clock() -> int:
    """One fixed append time: decisions carry their log time (conflict rows show when they
    opened), so two graphs fed the same calls are only equal if their logs' times are."""
    return T0


def _new(path: Path) -> Graph:
    g = claimgraph.open(path, create=True, graph="test", clock=_clock)
    g.publish_schema(SCHEMA, agent="admin", command_id="schema")
    return g


def test_restart_from_checkpoint_plus_tail_equals_full_replay(tmp_path: Path) -> None:
    """A reopened graph folds only the tail after its checkpoint; decisions and digests match a
    graph that replayed everything."""
    g = _new(tmp_path / "a")
    _write(g, 0, 30)
    info = checkpoint_graph(g)
    assert info.version == g.head() and info.graph == "test"
    assert [c.name for c in list_checkpoints(tmp_path / "a" / "checkpoints")] == [info.name]
    _write(g, 30, 10)
    g.close()

    g = open_graph(tmp_path / "a", clock=_clock)
    try:
        assert g.runtime.resumed_from == info.version  # did not replay from version 0
        _write(g, 40, 10)  # the governor decides from the checkpointed state
        verify(g)  # every decision equals a replay from the first command
        audit(g)  # the projection equals a re-projection of the whole log
        head = g.head()
        digest = digest_at(g.reader, head)
    finally:
        g.close()

    full = _new(tmp_path / "b")
    try:
        _write(full, 0, 50)
        assert full.head() == head
        assert digest_at(full.reader, head) == digest
    finally:
        full.close()


def test_restore_replaces_a_lost_projection(tmp_path: Path) -> None:
    """After the projection is lost, restore + tail re-projection gives the same digest."""
    path = tmp_path / "g"
    g = _new(path)
    _write(g, 0, 20)
    checkpoint_graph(g)
    _write(g, 20, 15)
    head, want = g.head(), digest_at(g.reader, g.head())
    g.close()
    shutil.rmtree(path / "projection")
    info = restore_graph(path)
    assert info.version < head
    g = open_graph(path)  # re-projects the tail after the checkpoint on open
    try:
        assert g.head() == head and digest_at(g.reader, head) == want
        audit(g)
    finally:
        g.close()


def test_restore_refuses_while_open_and_without_checkpoints(tmp_path: Path) -> None:
    """Restore needs the graph closed and a checkpoint to restore; both say so in one line."""
    path = tmp_path / "g"
    g = _new(path)
    try:
        checkpoint_graph(g)
        with pytest.raises(StorageError, match="in use"):
            restore_graph(path)
    finally:
        g.close()
    with pytest.raises(NotFoundError, match="no checkpoint 'v7'"):
        restore_graph(path, "v7")
    shutil.rmtree(path / "checkpoints")
    with pytest.raises(NotFoundError, match="no checkpoints"):
        restore_graph(path)


def test_a_checkpoint_of_another_log_is_not_trusted(tmp_path: Path) -> None:
    """A checkpoint whose decision digest does not match the log is skipped: full replay."""
    path = tmp_path / "g"
    g = _new(path)
    _write(g, 0, 5)
    info = checkpoint_graph(g)
    g.close()
    meta = info.path / "checkpoint.json"
    doc = json.loads(meta.read_text())
    doc["record_sha256"] = "0" * 64
    meta.write_text(json.dumps(doc))
    g = open_graph(path)
    try:
        assert g.runtime.resumed_from is None
        _write(g, 5, 2)
        verify(g)
    finally:
        g.close()
    with pytest.raises(StorageError, match="does not match"):
        restore_graph(path)


def test_a_checkpoint_folded_by_other_code_is_not_used(tmp_path: Path) -> None:
    """A checkpoint whose state format (the fold's code) differs is skipped: full replay."""
    path = tmp_path / "g"
    g = _new(path)
    _write(g, 0, 5)
    info = checkpoint_graph(g)
    g.close()
    g = open_graph(path)
    try:
        _write(g, 5, 1)
        assert g.runtime.resumed_from == info.version  # usable as written
    finally:
        g.close()
    meta = info.path / "checkpoint.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"state_format": "older-fold"}))
    g = open_graph(path)
    try:
        _write(g, 6, 1)
        assert g.runtime.resumed_from is None
        verify(g)
    finally:
        g.close()


def test_prune_keeps_the_newest_checkpoints(tmp_path: Path) -> None:
    """prune deletes all but the newest N checkpoints; keeping none is refused."""
    from claimgraph.projections.checkpoints import prune_checkpoints

    path = tmp_path / "g"
    g = _new(path)
    try:
        made = []
        for i in range(3):
            _write(g, i, 1)
            made.append(checkpoint_graph(g).name)
        root = path / "checkpoints"
        assert [c.name for c in prune_checkpoints(root, 1)] == made[:2]
        assert [c.name for c in list_checkpoints(root)] == made[2:]
        with pytest.raises(ConfigError, match="at least one"):
            prune_checkpoints(root, 0)
    finally:
        g.close()
