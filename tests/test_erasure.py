"""Erasure for privacy: an admin's erase removes a claim's payload from every read at every
version, leaves the graph's state alone, and keeps replay, verify and audit deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.wire import encode_command
from claimgraph.errors import InputError
from claimgraph.logs.embedded import open_rdict
from claimgraph.projections.checkpoints import checkpoint_graph, list_checkpoints
from claimgraph.projections.reader import ProjectionReader
from claimgraph.service.audit import audit, digest_at, verify
from claimgraph.service.graph import Graph, open_graph
from tests.conftest import SCHEMA

SECRET = "alice@example.com"


def _graph(path: Path) -> Graph:
    g = claimgraph.open(path, create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    return g


def _edge_reads(g: Graph, at: int) -> list[object]:
    return [
        g.edge("depends_on", "service:a", "service:b", at=at),
        g.neighbors("service:a", at=at, direction="out"),
        g.quarantine(at=at, include_closed=True),
    ]


def test_erase_removes_the_payload_at_every_version_and_nothing_else(tmp_path: Path) -> None:
    """After erase, the claim reads without evidence, reasoning or properties at every version
    (also before the erase), the log reads scrubbed, and every edge read is unchanged."""
    g = _graph(tmp_path / "g")
    try:
        c = g.assert_("depends_on", "service:a", "service:b", agent="inventory",
                      evidence=[SECRET], reasoning=f"told by {SECRET}",
                      properties={"contact": SECRET})  # fmt: skip
        g.deny("depends_on", "service:a", "service:b", agent="tracer", evidence=["trace"])
        checkpoint_graph(g)
        g.assert_("depends_on", "service:a", "service:c", agent="inventory")
        versions = list(range(g.head() + 1))
        before = {v: _edge_reads(g, v) for v in versions}
        assert g.claim_info(c.command_id, at=c.version)["evidence"] == [SECRET]

        r = g.erase(c.command_id, agent="admin", reason="privacy request PR-17")
        assert (r.kind, r.reason, r.decision["target"]) == ("accepted", "erased", c.command_id)
        for v in [*versions, r.version]:
            row = g.claim_info(c.command_id, at=v)
            if row is None:
                continue
            assert SECRET not in str(row), v
            assert (row["evidence"], row["reasoning"], row["properties"]) == ([], "", {})
            assert row["erased"] == r.version and row["agent"] == "inventory"
        assert all(_edge_reads(g, v) == before[v] for v in versions)  # state untouched
        logged = dict(g.decisions(0, 100))
        assert SECRET not in str(logged) and logged[c.version]["claim"]["evidence"] == []
        assert logged[c.version + 1]["claim"]["evidence"] == ["trace"]  # others keep theirs

        # later rows of the claim (its status changes) are built from the scrubbed record
        g.resolve(g.quarantine()[0]["conflict_id"], winner=c.command_id, agent="reviewer")
        assert SECRET not in str(g.claim_info(c.command_id))
        verify(g)  # replaying the commands still gives identical decision bytes
        audit(g)  # a re-projection erases at the same version: identical rows
        audit(g, start=c.version, end=c.version)  # ... also for one version before the erase
        cp = list_checkpoints(tmp_path / "g" / "checkpoints")[0]
        db = open_rdict(cp.path / "projection", create=False)
        try:
            row = ProjectionReader(db).claim(c.command_id, cp.version)
            assert row is not None and SECRET not in str(row)  # checkpoints are scrubbed too
        finally:
            db.close()
    finally:
        g.close()
    for d in (tmp_path / "g" / "projection", cp.path / "projection"):
        for f in d.iterdir():  # the bytes are gone from the files, not only from reads
            assert SECRET.encode() not in f.read_bytes(), f"{f} still holds the payload"


def test_only_admins_erase_known_claims(tmp_path: Path) -> None:
    """Erase by a non-admin, or of an unknown claim, is a recorded rejection."""
    g = _graph(tmp_path / "g")
    try:
        c = g.assert_("depends_on", "service:a", "service:b", agent="inventory", evidence=[SECRET])
        r = g.erase(c.command_id, agent="inventory", reason="mine")
        assert (r.kind, r.reason) == ("rejected", "not_admin")
        r = g.erase("nope", agent="admin", reason="x")
        assert (r.kind, r.reason) == ("rejected", "unknown_claim")
        assert g.claim_info(c.command_id)["evidence"] == [SECRET]
        verify(g)
    finally:
        g.close()


def test_reprojection_after_erase_is_identical(tmp_path: Path) -> None:
    """Deleting the projection and re-projecting the log gives the same erased rows."""
    g = _graph(tmp_path / "g")
    c = g.assert_("depends_on", "service:a", "service:b", agent="inventory", evidence=[SECRET])
    g.erase(c.command_id, agent="admin", reason="PR-18")
    head = g.head()
    want = digest_at(g.reader, head)
    g.close()
    import shutil

    shutil.rmtree(tmp_path / "g" / "projection")
    g = open_graph(tmp_path / "g")
    try:
        assert digest_at(g.reader, head) == want
        assert SECRET not in str(g.claim_info(c.command_id, at=c.version))
    finally:
        g.close()


def test_erase_on_an_empty_graph_is_rejected(tmp_path: Path) -> None:
    """Without a schema there is no admin: erase is rejected, not a crash."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    try:
        r = g.erase("x", agent="admin", reason="x")
        assert (r.kind, r.reason) == ("rejected", "no_schema")
    finally:
        g.close()


@pytest.mark.parametrize("bad", ["", "a\x00b"])
def test_erase_with_a_bad_claim_id_is_rejected(tmp_path: Path, bad: str) -> None:
    """An empty or unprintable claim id is outside the declared domain: the keyword writer
    refuses it before sending (nothing recorded); as a raw record it is rejected invalid_id."""
    g = _graph(tmp_path / "g")
    try:
        head = g.head()
        with pytest.raises(InputError, match="claim_id"):
            g.erase(bad, agent="admin", reason="x")
        assert g.head() == head
        raw = {"type": "erase", "command_id": "e-bad", "graph": "test", "agent": "admin",
               "task": "", "claim_id": bad, "reason": "x"}  # fmt: skip
        (r,) = g.submit([encode_command(raw)])  # type: ignore[arg-type]
        assert (r.kind, r.reason, r.version) == ("rejected", "invalid_id", head + 1)
    finally:
        g.close()


def test_erase_in_the_same_batch_as_its_claim(tmp_path: Path) -> None:
    """A claim and its erase decided in one batch: the rows staged earlier in the batch are
    scrubbed too, and the projection never runs ahead of the decisions log."""
    g = _graph(tmp_path / "g")
    try:
        env = {"graph": "test", "task": ""}
        claim: Any = {"type": "claim", "command_id": "c1", "agent": "inventory", "run_id": None,
                      "edge_type": "depends_on", "subject_type": "service", "subject_id": "a",
                      "object_type": "service", "object_id": "b", "polarity": "assert",
                      "confidence": 1.0, "evidence": [SECRET], "reasoning": SECRET,
                      "asserted_at": 1, "based_on_version": None, "properties": {}}  # fmt: skip
        erase: Any = {"type": "erase", "command_id": "e1", "agent": "admin", "claim_id": "c1",
                      "reason": "PR-19"}  # fmt: skip
        receipts = g.submit([claim | env, erase | env])
        assert [r.reason for r in receipts] == ["new", "erased"]
        row = g.claim_info("c1", at=receipts[0].version)
        assert row is not None and SECRET not in str(row)
        assert g.head() == g.logs.decisions.end() - 1
        audit(g)
        verify(g)
    finally:
        g.close()


def _claim_rows(g: Graph, claim_id: str) -> list[tuple[bytes, bytes]]:
    """The claim's record (R) and status (K) rows."""
    out = []
    for family in (b"R", b"K"):
        prefix = family + claim_id.encode() + b"\x00"
        it = g.reader.db.iter()
        it.seek(prefix)
        while it.valid() and bytes(it.key()).startswith(prefix):
            out.append((bytes(it.key()), bytes(it.value())))
            it.next()
        it.status()  # raises if the iterator stopped on an error rather than at the end
    return out


def test_rows_after_an_erase_do_not_depend_on_a_restart(tmp_path: Path) -> None:
    """A claim's rows written after its erase carry ``erased`` whether the projector still had
    the scrubbed record cached or read it back after a restart: the same bytes either way (a
    restart between an erase and the claim's next status change once changed them)."""
    rows = []
    for restart in (False, True):
        g = _graph(tmp_path / f"g{restart}")
        c = g.assert_("depends_on", "service:a", "service:b", agent="inventory",
                      evidence=[SECRET], asserted_at=1, command_id="c1")  # fmt: skip
        g.deny("depends_on", "service:a", "service:b", agent="tracer", asserted_at=1,
               command_id="d1")  # fmt: skip
        r = g.erase(c.command_id, agent="admin", reason="PR-20")
        if restart:
            g.close()
            g = open_graph(tmp_path / f"g{restart}")
        try:
            g.resolve(g.quarantine()[0]["conflict_id"], winner=c.command_id, agent="reviewer")
            latest = g.claim_info(c.command_id)
            assert latest is not None and latest["erased"] == r.version
            audit(g)
            rows.append(_claim_rows(g, c.command_id))
        finally:
            g.close()
    assert len(rows[0]) >= 3 and rows[0] == rows[1]
