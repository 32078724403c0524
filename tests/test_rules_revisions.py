"""Governor rules revisions: an old log replays under its own rules; an upgrade starts the chain.

The old logs are data written by main before revisions existed (tests/legacy.py); the new
code must read, verify and audit them byte for byte, keep deciding them under revision 1
until an admin upgrades, and from the upgrade on chain every decision.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rocksdict import WriteBatch

import claimgraph
from claimgraph.core.chain import GENESIS, chain_next, command_digest
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.wire import decode_decision
from claimgraph.errors import IntegrityError
from claimgraph.service.audit import audit, verify
from claimgraph.service.chain import check_chain
from tests.conftest import ROOT, SCHEMA
from tests.legacy import legacy_graphs, restore

LEGACY = sorted(legacy_graphs())
TASK = "reconcile-service-topology"  # the inventory demo's writer task


def _chain(g: claimgraph.Graph) -> bytes:
    h = GENESIS
    for rec in g.logs.decisions.read(0, 1_000_000):
        h = chain_next(h, rec.value)
    return h


@pytest.mark.parametrize("name", LEGACY)
def test_a_log_written_by_main_reads_verifies_and_audits(name: str, tmp_path: Path) -> None:
    """Every legacy graph opens, verifies byte for byte, audits, and keeps its rules (1)."""
    doc = legacy_graphs()[name]
    with claimgraph.open(restore(tmp_path / "g", name)) as g:
        assert g.head() == doc["head"]
        rep = verify(g)
        assert rep.decisions == len(doc["decisions"])
        audit(g, samples=3)
        decisions = g.decisions(0, 10_000)
        assert {d["rules"] for _, d in decisions} == {1}
        assert all(d["prev_hash"] == d["command_sha256"] == "" for _, d in decisions)
        assert [base64.b64encode(r.value).decode() for r in g.logs.decisions.read(0, 10_000)] == [
            r[2] for r in doc["decisions"]
        ]  # nothing rewritten
        # until an admin upgrades, the graph decides under revision 1: unchained
        r = g.tick()
        assert (r.decision["rules"], r.decision["prev_hash"]) == (1, "")
        verify(g)
        assert check_chain(g).chained_from is None


def test_an_upgrade_starts_the_chain_over_the_old_log(tmp_path: Path) -> None:
    """upgrade_rules by an admin moves to the newest revision; its decision anchors every
    older one."""
    with claimgraph.open(restore(tmp_path / "g", "inventory")) as g:
        assert g.upgrade_rules(CURRENT, agent="inventory-agent").reason == "not_admin"
        assert g.upgrade_rules(CURRENT + 1, agent="platform-admin").reason == "invalid_field"
        before = _chain(g)
        up = g.upgrade_rules(CURRENT, agent="platform-admin")
        assert (up.kind, up.reason, up.decision["rules"]) == ("accepted", "rules_upgraded", CURRENT)
        assert up.decision["prev_hash"] == before.hex()
        cmd = g.logs.commands.get(up.position)
        assert cmd is not None and up.decision["command_sha256"] == command_digest(cmd.value)
        r = g.assert_("depends_on", "service:p", "service:q", agent="inventory-agent", task=TASK)
        assert (r.kind, r.decision["rules"]) == ("accepted", CURRENT)
        assert r.decision["prev_hash"] == _chain_upto(g, r.version)
        again = g.upgrade_rules(CURRENT, agent="platform-admin")
        assert again.reason == "invalid_field"  # no downgrade, no repeat
        rep = check_chain(g)
        assert rep.chained_from == up.version and rep.digest == _chain(g).hex()
        verify(g)  # each decision re-decided under the revision it names
        audit(g, samples=2)


def _chain_upto(g: claimgraph.Graph, version: int) -> str:
    h = GENESIS
    for rec in g.logs.decisions.read(0, version):
        h = chain_next(h, rec.value)
    return h.hex()


def _tamper(g: claimgraph.Graph, version: int, old: bytes, new: bytes) -> None:
    rec = g.logs.decisions.get(version)
    assert rec is not None and old in rec.value
    wb = WriteBatch(raw_mode=True)
    value = rec.value.replace(old, new, 1)
    wb.put(b"D" + version.to_bytes(8, "big"), rec.timestamp.to_bytes(8, "big") + value)
    g.logs.write(wb)


def test_a_changed_old_decision_breaks_the_chain_at_the_next(tmp_path: Path) -> None:
    """Editing a decision written before the upgrade is named by verify (the chain anchors it)."""
    with claimgraph.open(restore(tmp_path / "g", "inventory")) as g:
        up = g.upgrade_rules(CURRENT, agent="platform-admin")
        r = g.assert_("depends_on", "service:p", "service:q", agent="inventory-agent", task=TASK)
        verify(g)
        cid = g.decisions(3, 1)[0][1]["command_id"].encode()
        _tamper(g, 3, cid, cid[:-1] + b"X")
        # unchained decisions have no hash of their own: the upgrade's anchor names the break
        with pytest.raises(IntegrityError, match=f"at or before version {up.version - 1}"):
            verify(g)
        assert r.version == up.version + 1


def test_a_new_graph_is_chained_and_its_digest_is_checked_by_the_cli(tmp_path: Path) -> None:
    """A new graph decides under the newest rules; `digest` and `verify --digest` agree."""
    path = tmp_path / "g"
    with claimgraph.open(path, create=True, graph="t") as g:
        g.publish_schema(SCHEMA, agent="admin")
        for i in range(5):
            g.assert_("depends_on", "service:a", f"service:b{i}", agent="inventory")
        assert {d["rules"] for _, d in g.decisions(0, 100)} == {CURRENT}
        assert check_chain(g).chained_from == 0
        head = g.head()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "claimgraph", "--data", str(path)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True)

    r = run("digest", "--at", "3", "--json")
    assert r.returncode == 0, r.stderr
    kept = json.loads(r.stdout)["digest"]
    assert run("verify", "--digest", kept, "--to", "3").returncode == 0
    assert run("verify", "--digest", kept).returncode == 7  # head is not version 3
    with claimgraph.open(path) as g:
        g.assert_("depends_on", "service:a", "service:c", agent="inventory")
        _tamper(g, 2, b"service", b"servicx")
    bad = run("verify", "--digest", kept, "--to", "3")
    assert bad.returncode == 7 and "version 2" in bad.stderr
    shown = run("rules", "show", "--json")
    assert json.loads(shown.stdout)["rules"] == CURRENT
    assert head == 5


def test_decisions_carry_the_revision_and_the_governor_follows_the_log(tmp_path: Path) -> None:
    """A graph decides under its last decision's revision, not the code's newest."""
    with claimgraph.open(restore(tmp_path / "g", "inventory")) as g:
        last = decode_decision(g.logs.decisions.get(g.head()).value)  # type: ignore[union-attr]
        assert last["rules"] == 1
        r = g.assert_("depends_on", "service:x", "service:y", agent="inventory-agent", task=TASK)
        assert r.decision["rules"] == 1
