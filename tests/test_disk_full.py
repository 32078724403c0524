"""A full disk: writes fail cleanly (507, exit 8), reads go on, writes resume by themselves.

The first test fills a real disk: a small tmpfs mounted in a private mount namespace
(``unshare``), where ``claimgraph serve`` runs and RocksDB meets a true ENOSPC. Every write
answers either a receipt whose decision is in the log at that version, or a problem+json 507
for a command the log never decided — never a plain-text 500, never a failure for a command
that was in fact decided. The other tests make exactly one of the two stores fail, with the
very exception rocksdict raises on ENOSPC (recorded in ``tests/data/disk_full.json``), to
check each half of that promise where a real disk cannot be aimed at one store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import claimgraph
from claimgraph.errors import DiskFullError
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from tests.conftest import ROOT
from tests.http_fixtures import PRINCIPALS, TOKENS

DATA = json.loads((Path(__file__).parent / "data" / "disk_full.json").read_text())
UNSHARE = shutil.which("unshare")


def _namespace() -> list[str] | None:
    """An ``unshare`` prefix that can mount a tmpfs here (root, or user namespaces), or None."""
    if UNSHARE is None:
        return None
    for prefix in ([UNSHARE, "--mount"], [UNSHARE, "--user", "--map-root-user", "--mount"]):
        probe = subprocess.run(
            [*prefix, "sh", "-c", "mount -t tmpfs -o size=1m probe /mnt 2>/dev/null || "
             "mount -t tmpfs -o size=1m probe /tmp"],
            capture_output=True, timeout=30,
        )  # fmt: skip
        if probe.returncode == 0:
            return prefix
    return None


def _claim(i: int) -> dict[str, Any]:
    return {
        "command_id": f"full-{i}",
        "edge_type": "depends_on",
        "subject": f"service:a{i}",
        "object": f"service:b{i}",
        "evidence": ["x" * 200],
        "reasoning": "y" * 500,  # a few KB per write: the disk fills in few attempts
        "properties": {f"p{k}": "z" * 200 for k in range(8)},
    }


class Worker:
    """The worker in its namespace: one JSON request per line, one JSON answer per line."""

    def __init__(self, prefix: list[str], tmp: Path) -> None:
        mnt = tmp / "mnt"
        mnt.mkdir()
        tokens = tmp / "tokens.json"
        entries = [{"agent": p["agent"], "token": TOKENS[p["agent"]]} for p in PRINCIPALS]
        tokens.write_text(json.dumps({"tokens": entries}))
        script = (
            f'mount -t tmpfs -o size={DATA["tmpfs_bytes"]} claimgraph-test "$0" && '
            'exec "$1" -m tests.disk_full_worker "$0" "$2"'
        )
        self.proc = subprocess.Popen(
            [*prefix, "sh", "-c", script, str(mnt), sys.executable, str(tokens)],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.read()['ready']}"
        self.headers = {"Authorization": f"Bearer {TOKENS['inventory']}"}

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the worker died (exit {self.proc.wait()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, op: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def post(self, i: int) -> httpx.Response:
        return httpx.post(
            f"{self.url}/v1/commands/claim", json=_claim(i), headers=self.headers, timeout=60
        )


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    prefix = _namespace()
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare/mount not permitted)")
    w = Worker(prefix, tmp_path)
    yield w
    if w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait()


def test_a_full_disk_fails_writes_cleanly_and_writes_resume(worker: Worker) -> None:
    """On a real ENOSPC: 507 problems that decided nothing, reads served, CLI exit 8; once
    space is freed the next write succeeds; every receipt is in the log, no refusal is."""
    answered: dict[str, tuple[int, int | None]] = {}  # command id → (status, version)

    def post(i: int) -> httpx.Response:
        r = worker.post(i)
        assert r.headers["content-type"].startswith("application/"), r.text  # never text/plain
        body = r.json()
        answered[f"full-{i}"] = (r.status_code, body.get("version"))
        return r

    for i in range(DATA["claims_before"]):
        assert post(i).status_code == 200
    edge = {"edge_type": "depends_on", "subject": "service:a0", "object": "service:b0"}
    before = httpx.get(f"{worker.url}/v1/edge", params=edge, headers=worker.headers).json()

    assert worker.ask("fill")["free"] < 64 * 1024
    i = DATA["claims_before"]
    refused = 0
    while refused < 3:  # until the disk refuses, then twice more (the quick "still full" path)
        assert i < DATA["claims_before"] + DATA["max_attempts_while_full"], "the disk never filled"
        r = post(i)
        i += 1
        if r.status_code != 200:
            assert r.status_code == 507, r.text
            assert r.headers["content-type"] == "application/problem+json"
            problem = r.json()
            assert problem["reason"] == "insufficient_storage"
            assert "no space left" in problem["detail"].lower() or "full" in problem["detail"]
            refused += 1
    # reads go on while the disk is full
    head = httpx.get(f"{worker.url}/v1/head", headers=worker.headers)
    assert head.status_code == 200
    now = httpx.get(f"{worker.url}/v1/edge", params=edge, headers=worker.headers)
    assert now.status_code == 200 and now.json()["state"] == before["state"] == "present"
    # the CLI on a full disk: exit 8 and one clear line
    cli = worker.ask(
        "cli", args=["assert", "depends_on", "service:c", "service:d", "--agent", "inventory"]
    )
    assert cli["rc"] == 8, cli
    assert "space" in cli["stderr"] and "internal error" not in cli["stderr"], cli["stderr"]

    assert worker.ask("free")["free"] > 8 << 20
    for _ in range(DATA["claims_after"]):  # no retry: the first write after freeing succeeds
        r = post(i)
        i += 1
        assert r.status_code == 200, r.text
    cli = worker.ask(
        "cli", args=["assert", "depends_on", "service:c", "service:d", "--agent", "inventory"]
    )
    assert cli["rc"] == 0, cli

    end = worker.ask("stop")
    assert end["serve_rc"] == 0, end["serve_stderr"]
    assert end["verify"]["ok"] and end["audit"]
    logged = {cid: v for v, cid, _ in end["decisions"]}
    assert len(logged) == len(end["decisions"]), "one decision per command"
    for cid, (status, version) in answered.items():
        if status == 200:
            assert logged.get(cid) == version, f"{cid}: its receipt said v{version}"
        else:
            assert cid not in logged, f"{cid} was refused ({status}) but decided"
    assert end["head"] == max(logged.values())


def _full(db: Any, path: str, fails: Callable[[Any], bool] = lambda wb: True) -> Any:
    """``db`` on a device that is full: a write (``fails(batch)``) raises what rocksdict raises
    on ENOSPC — its own type (a bare Exception) and message."""

    class Full:
        def write(self, wb: Any, *args: Any) -> None:
            if fails(wb):
                raise Exception(DATA["rocksdict_enospc"].format(path=path))
            db.write(wb, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(db, name)

    return Full()


def _assert(g: Graph, i: int) -> Any:
    return g.assert_("depends_on", f"service:a{i}", f"service:b{i}", agent="inventory",
                     command_id=f"c-{i}")  # fmt: skip


def test_a_log_that_cannot_be_written_decides_nothing(graph: Graph) -> None:
    """The log's write fails: DiskFullError, no command and no decision in the log; the same
    command sent again after space returns is decided (it is not a duplicate)."""
    _assert(graph, 1)
    end = (graph.logs.commands.end(), graph.logs.decisions.end())
    graph.logs.db = _full(graph.logs.db, str(graph.logs.path))
    graph.logs.failed = False
    with pytest.raises(DiskFullError, match="no space left"):
        _assert(graph, 2)
    assert (graph.logs.commands.end(), graph.logs.decisions.end()) == end
    assert graph.logs.failed and graph.claim_info("c-1") is not None
    r = _assert(graph, 2)  # the disk has room: the store is reopened and the write goes through
    assert r.kind == "accepted" and r.version == end[1]
    assert not graph.logs.failed
    verify(graph)
    audit(graph)


def test_a_projection_that_cannot_be_written_never_fails_a_decided_command(
    graph: Graph,
) -> None:
    """The log's write lands, the projection's fails: the receipt is returned (the decision
    stands), reads lag, and the next write catches the projection up."""
    _assert(graph, 1)
    graph.projection.db = _full(graph.projection.db, str(graph.projection.path))
    r = _assert(graph, 2)
    assert r.kind == "accepted" and r.version == graph.logs.decisions.end() - 1
    assert graph.projection.failed and graph.head() == r.version - 1  # reads lag
    r3 = _assert(graph, 3)
    assert r3.version == r.version + 1 and graph.head() == r3.version
    assert graph.claim_info("c-2") is not None and not graph.projection.failed
    verify(graph)
    audit(graph)


def test_a_write_that_fails_leaves_no_command_to_decide_later(graph: Graph) -> None:
    """The disk fills between a command's append and its decision (any batch carrying a
    decision fails): the write is refused and the command is not decided later either —
    a command and its decision go in one batch."""
    end = (graph.logs.commands.end(), graph.logs.decisions.end())
    graph.logs.db = _full(graph.logs.db, str(graph.logs.path), fails=lambda wb: len(wb) > 1)
    with pytest.raises(DiskFullError):
        _assert(graph, 1)
    path = graph.path
    graph.close()
    with claimgraph.open(path) as g:  # a later open decides whatever is pending
        assert (g.logs.commands.end(), g.logs.decisions.end()) == end
        assert g.claim_info("c-1") is None


TORN = DATA["torn_wal"]


def test_a_full_disk_in_the_middle_of_a_large_batch_never_tears_the_log(tmp_path: Path) -> None:
    """A multi-MB batch that meets a full tmpfs part-way through its write-ahead log record
    (several amounts of free space), by ``submit`` and by one ``POST /v1/commands`` under
    ``serve``: a DiskFullError (exit 8, 507), nothing of it decided; once space is freed every
    command opens the graph with no rebuild, the next write succeeds, verify and audit pass."""
    prefix = _namespace()
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare/mount not permitted)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    tokens = tmp_path / "tokens.json"
    entries = [{"agent": p["agent"], "token": TOKENS[p["agent"]]} for p in PRINCIPALS]
    tokens.write_text(json.dumps({"tokens": entries}))
    script = (
        f'mount -t tmpfs -o size={TORN["tmpfs_bytes"]} claimgraph-test "$0" && '
        'exec "$1" -m tests.torn_wal_worker "$0" "$2" "$3"'
    )
    r = subprocess.run(
        [*prefix, "sh", "-c", script, str(mnt), sys.executable, str(tmp_path), str(tokens)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.splitlines()[-1])

    def reopened(case: dict[str, Any]) -> None:
        for step in ("head", "next", "verify", "audit"):
            assert case[step]["rc"] == 0, (step, case[step]["stderr"])
        assert case["next"]["lines"] == 1

    for free, case in out["cli"].items():
        assert case["free"] <= int(free) + 4096
        sub = case["submit"]
        assert sub["rc"] == 8 and sub["lines"] == 0, (free, sub)
        assert "no space left" in sub["stderr"] and "internal error" not in sub["stderr"]
        reopened(case)
    for free, case in out["serve"].items():
        assert case["batch"] == {"status": 507, "reason": "insufficient_storage"}, (free, case)
        assert case["http_next"] == {"status": 200, "kind": "accepted"}, (free, case)
        assert case["serve_rc"] == 0, case["serve_stderr"]
        reopened(case)
