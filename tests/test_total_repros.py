"""The reproductions of the "total governor" issue: no input stops the governor, nothing is
silent, and every store a failure met opens again with a named answer.

Inputs are data files under ``tests/data/total/`` (see its README).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request

import claimgraph
from claimgraph.core import governor
from claimgraph.core.governance import iso_utc
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.errors import CorruptionError, IntegrityError, NotFoundError
from claimgraph.service.audit import verify
from claimgraph.service.graph import Graph
from tests.conftest import ROOT, SCHEMA
from tests.legacy import restore
from tests.test_review_page import _free_port

DATA = ROOT / "tests" / "data" / "total"
CLI = [sys.executable, "-m", "claimgraph"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
YEAR_10000 = 253_402_300_800_000


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--data", str(data), *args], capture_output=True, text=True, env=ENV, timeout=300
    )


def _revision_2_graph(path: Path) -> Path:
    """The inventory demo's log as written before revisions, upgraded to revision 2."""
    restore(path, "inventory")
    with claimgraph.open(path) as g:
        up = g.upgrade_rules(2, agent="platform-admin")
        assert (up.kind, up.decision["rules"]) == ("accepted", 2), up.decision
    return path


def _new_graph(path: Path) -> Path:
    r = _cli(path, "init", "--graph", "platform")
    assert r.returncode == 0, r.stderr
    schema = ROOT / "schemas" / "graphs" / "inventory.yaml"
    r = _cli(path, "schema", "apply", str(schema), "--agent", "platform-admin")
    assert r.returncode == 0, r.stderr
    return path


def test_iso_utc_is_total_and_agrees_with_datetime_where_it_can() -> None:
    """Every integer formats; around the epoch and to year 9999 exactly as datetime does."""
    from datetime import UTC, datetime

    for ms in (0, 1, 86_399_999, 951_782_400_000, 253_402_300_799_999, -1, -86_400_001):
        secs, rem = divmod(ms, 1000)
        want = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        assert iso_utc(ms) == f"{want}.{rem:03d}Z"
    assert iso_utc(YEAR_10000) == "+10000-01-01T00:00:00.000Z"
    assert iso_utc(2**63 - 1).startswith("+292278994-")
    assert iso_utc(-(2**63)).startswith("-292275055-")


@pytest.mark.parametrize("revision", [2, CURRENT])
def test_a_far_future_claim_and_grant_stop_no_writer(revision: int, tmp_path: Path) -> None:
    """The far-future file through ``submit``: exit 0, one decision per line, the same bytes
    on replay. Under revision 2 the year-10000 claim is accepted and the next claim on its
    slot is decided (conflicted, the detail naming the time in ISO 8601's expanded form);
    under revision 3 both far-future values are rejected naming the field and the bound."""
    g = tmp_path / "g"
    _revision_2_graph(g) if revision == 2 else _new_graph(g)
    r = _cli(g, "submit", str(DATA / "far_future.jsonl"))
    assert r.returncode == 0, r.stderr
    ds = {d["command_id"]: d for d in map(json.loads, r.stdout.splitlines())}
    assert list(ds) == [f"far-{i}" for i in range(1, 6)]
    assert {d["rules"] for d in ds.values()} == {revision}
    if revision == 2:
        assert ds["far-1"]["kind"] == "accepted"
        assert ds["far-2"]["reason"] == "older_than_current", ds["far-2"]
        assert "+10000-01-01T00:00:00.000Z" in ds["far-2"]["detail"]
        assert ds["far-4"]["kind"] == "accepted" and "+292278994-" in ds["far-4"]["detail"]
    else:
        assert (ds["far-1"]["reason"], ds["far-4"]["reason"]) == ("invalid_field",) * 2
        assert ds["far-1"]["detail"].startswith("asserted_at must be an integer in [0, 2534")
        assert ds["far-4"]["detail"].startswith("expires_at must be an integer in [0, ")
        assert ds["far-2"]["kind"] == "accepted"
    assert ds["far-3"]["kind"] == "accepted"
    assert _cli(g, "verify").returncode == 0


def test_a_rule_that_fails_is_a_recorded_internal_error(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception inside a rule: one rejected/internal_error decision naming the rule and
    the exception's class (not its message), no effect; the next command of any writer is
    decided; verify reproduces it while the code is unchanged."""

    def broken(state: Any, cmd: Any, d: Any) -> None:
        raise ZeroDivisionError(f"a message that differs on every run {id(cmd)}")

    monkeypatch.setitem(governor._HANDLERS, "escalate", broken)
    head = graph.head()
    r = graph.escalate("cf:nothing", agent="reviewer", reason="look")
    d = r.decision
    assert (d["kind"], d["reason"]) == ("rejected", "internal_error")
    assert "'escalate'" in d["detail"] and "ZeroDivisionError" in d["detail"]
    assert "differs" not in d["detail"]
    assert r.version == head + 1
    assert graph.assert_("depends_on", "service:a", "service:b", agent="tracer").kind == "accepted"
    verify(graph)  # the same code decides it the same way again


def test_a_failed_rule_under_serve_answers_and_the_next_write_is_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP: the write whose rule failed answers 500 with its recorded decision (so the
    client knows it was decided), counted in /metrics; every later write is decided."""
    from fastapi.testclient import TestClient

    from claimgraph.http.app import create_app
    from tests.http_fixtures import TOKENS, token_file

    def broken(state: Any, cmd: Any, d: Any) -> None:
        raise KeyError("boom")

    monkeypatch.setitem(governor._HANDLERS, "escalate", broken)
    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        app = create_app(g, tokens=token_file())
        with TestClient(app) as client:
            h = {"Authorization": f"Bearer {TOKENS['reviewer']}"}
            r = client.post("/v1/commands/escalate", json={"conflict_id": "cf:x"}, headers=h)
            assert r.status_code == 500 and r.json()["reason"] == "internal_error", r.text
            assert r.json()["decision"]["kind"] == "rejected" and "version" in r.json()
            h2 = {"Authorization": f"Bearer {TOKENS['inventory']}"}
            body = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
            ok = client.post("/v1/commands/claim", json=body, headers=h2)
            assert ok.status_code == 200, ok.text
            metrics = client.get("/metrics", headers=h).text
            assert "claimgraph_internal_errors_total 1.0" in metrics


@pytest.fixture
def buggy_server() -> Iterator[str]:
    """A real uvicorn server whose app has a route that raises (a bug), behind Bugs."""
    from claimgraph.http.middleware import Bugs

    app = FastAPI()

    @app.get("/port")
    def port(request: Request) -> dict[str, int]:
        assert request.client is not None
        return {"port": request.client.port}

    @app.post("/bug")
    def bug() -> None:
        raise RuntimeError("a bug")

    app.add_middleware(Bugs)
    p = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=p, log_level="error"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    with httpx.Client() as c:  # until it answers (an observed event)
        for _ in range(600):
            try:
                c.get(f"http://127.0.0.1:{p}/port", timeout=1)
                break
            except httpx.TransportError:
                threading.Event().wait(0.05)
    yield f"http://127.0.0.1:{p}"
    server.should_exit = True
    t.join(30)


def test_a_bug_answers_problem_json_and_keeps_the_connection(buggy_server: str) -> None:
    """A route that raises answers 500 problem+json saying the command may have been decided,
    and the client's keep-alive connection survives it (the next request comes from the
    same client port)."""
    with httpx.Client(base_url=buggy_server) as c:
        before = c.get("/port").json()["port"]
        r = c.post("/bug")
        assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
        assert "may have been decided" in r.json()["detail"]
        assert c.get("/port").json()["port"] == before


def test_a_store_that_met_corruption_closes_with_a_named_error(tmp_path: Path) -> None:
    """A close that RocksDB answers with a corruption it met is a CorruptionError naming the
    store (exit 7), and the logs are closed anyway."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    real = g.projection.db

    class Damaged:
        def close(self) -> None:
            real.close()
            raise Exception("Corruption: block checksum mismatch in 000012.sst")

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    g.projection.db = Damaged()  # type: ignore[assignment]
    with pytest.raises(CorruptionError, match=str(tmp_path / "g" / "projection")) as e:
        g.close()
    assert e.value.exit_code == 7
    again = claimgraph.open(tmp_path / "g")  # the logs were closed: the lock is free
    again.close()


def _cut_log(path: Path, keep: int) -> None:
    """Cut the embedded logs after version ``keep`` consistently (commands, decisions and
    the governor's position together), as a restored older backup of the log would be."""
    from rocksdict import WriteBatch

    from claimgraph.logs.embedded import EmbeddedLogStore
    from claimgraph.streams.embedded import GOVERNOR_POSITION

    logs = EmbeddedLogStore(path / "log")
    wb = WriteBatch(raw_mode=True)
    for prefix, log in ((b"C", logs.commands), (b"D", logs.decisions)):
        for off in range(keep + 1, log.end()):
            wb.delete(prefix + off.to_bytes(8, "big"))
    logs.stage_position(wb, GOVERNOR_POSITION, keep + 1)
    logs.write(wb)
    logs.close()


def test_a_checkpoint_beyond_the_log_is_refused(tmp_path: Path) -> None:
    """The projection deleted, a checkpoint at v30 kept, the log cut to v10: open refuses,
    naming the checkpoint and the versions lost, instead of reusing v11."""
    from claimgraph.projections.checkpoints import checkpoint_graph

    path = tmp_path / "g"
    with claimgraph.open(path, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        for i in range(30):
            g.assert_("depends_on", "service:a", f"service:b{i}", agent="inventory")
        assert checkpoint_graph(g).version == 30
    shutil.rmtree(path / "projection")
    _cut_log(path, 10)
    with pytest.raises(
        IntegrityError, match=r"checkpoint .* is at version 30 .* versions 11\.\.30"
    ):
        claimgraph.open(path)
    r = _cli(path, "head")
    assert r.returncode == 7 and "checkpoint" in r.stderr, r.stderr


def test_verify_of_a_digest_past_a_cut_log_is_an_integrity_error(tmp_path: Path) -> None:
    """A digest kept at v20, the log cut to v10: ``verify --digest D --to 20`` exits 7 (an
    integrity error a monitor watches for), not 5."""
    path = tmp_path / "g"
    with claimgraph.open(path, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        for i in range(20):
            g.assert_("depends_on", "service:a", f"service:b{i}", agent="inventory")
    digest = _cli(path, "digest", "--at", "20").stdout.split()[0]
    _cut_log(path, 10)
    shutil.rmtree(path / "projection")
    r = _cli(path, "verify", "--digest", digest, "--to", "20")
    assert r.returncode == 7, r.stderr
    assert "lost versions 11..20" in r.stderr


def test_stale_spill_directories_of_dead_processes_are_swept(tmp_path: Path) -> None:
    """A spill left by a killed process is removed when the next spill starts; one whose
    RocksDB a live process holds, one a live process is still creating (no lock taken yet:
    two processes spilling at once failed an open on it) and this process's own are kept."""
    from rocksdict import Rdict

    from claimgraph.native import spill

    dead = tmp_path / "claimgraph-state-999999999-dead"
    Rdict(str(dead)).close()  # a database nobody holds any more
    live = tmp_path / "claimgraph-state-1-live"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from rocksdict import Rdict; "
         f"db = Rdict({str(live)!r}); print('open', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        mine = tmp_path / f"claimgraph-state-{os.getpid()}-mine"
        mine.mkdir()
        # a live process's spill being created: no LOCK yet, or a LOCK not yet taken
        fresh = tmp_path / f"claimgraph-state-{holder.pid}-fresh"
        fresh.mkdir()
        opening = tmp_path / f"claimgraph-state-{holder.pid}-opening"
        opening.mkdir()
        (opening / "LOCK").touch()
        assert spill.sweep(str(tmp_path)) == [str(dead)]
        assert not dead.exists() and live.exists() and mine.exists()
        assert fresh.exists() and opening.exists()
    finally:
        holder.communicate("")


def test_serve_warns_about_a_token_file_others_can_read(tmp_path: Path) -> None:
    """A token file with mode 644 is used, with a warning that names it and the fix."""
    from claimgraph.http.tokens import WatchedTokenFile
    from tests.http_fixtures import TOKENS

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"agent": "inventory", "token": TOKENS["inventory"]}]}))
    said: list[str] = []
    os.chmod(path, 0o600)
    WatchedTokenFile(path, report=said.append)
    assert said == []
    os.chmod(path, 0o644)
    WatchedTokenFile(path, report=said.append)
    assert len(said) == 1 and f"chmod 600 {path}" in said[0] and "0644" in said[0]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # warned, not changed


def test_an_echoed_id_is_cut_with_its_length(tmp_path: Path) -> None:
    """``claim`` of a 100 KB id says it is not there without echoing 100 KB."""
    path = _new_graph(tmp_path / "g")
    r = _cli(path, "claim", "x" * 100_000)
    assert r.returncode == NotFoundError.exit_code, r
    assert len(r.stderr) < 500 and "(100000 characters)" in r.stderr, r.stderr[:300]


def test_a_bom_begins_the_input_only(tmp_path: Path) -> None:
    """A byte order mark at the start of the input is accepted; at the start of a later line
    the line is rejected naming it (not "not JSON")."""
    path = _new_graph(tmp_path / "g")
    r = _cli(path, "submit", str(DATA / "bom.jsonl"))
    assert r.returncode == 0, r.stderr
    first, second = map(json.loads, r.stdout.splitlines())
    assert (first["command_id"], first["kind"]) == ("bom-1", "accepted")
    assert second["reason"] == "malformed" and "byte order mark" in second["detail"]


def test_a_cli_claim_outside_the_domain_is_refused_and_records_nothing(tmp_path: Path) -> None:
    """``claimgraph assert`` with a time past year 9999: exit 4 naming the field and the
    bound, and the graph's head does not move (the CLI answers its caller, as HTTP does)."""
    path = _new_graph(tmp_path / "g")
    r = _cli(
        path, "assert", "depends_on", "service:a", "service:b", "--agent", "inventory-agent",
        "--asserted-at", str(YEAR_10000),
    )  # fmt: skip
    assert r.returncode == 4, r.stderr
    assert "asserted_at must be an integer in [0, 253402300799999]" in r.stderr
    assert "head v0" in _cli(path, "head").stdout
