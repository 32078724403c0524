"""The CLI while another process holds the data directory: reads attach, writes reach the writer.

Real processes (``claimgraph serve``, a long ``claimgraph submit``), real RocksDB secondaries,
a real unix socket. Synchronised on what is observed (writer.json, the head a secondary sees),
never on sleeps.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.service.attached import READERS, AttachedGraph
from claimgraph.service.graph import Graph
from claimgraph.service.local import (
    ANNOUNCEMENT,
    MAX_RECORDS,
    MAX_REQUEST,
    SOCKET,
    read_announcement,
)
from claimgraph.service.local_writer import WriterListener
from tests.conftest import ROOT, SCHEMA
from tests.test_review_page import _free_port

INVENTORY = (ROOT / "schemas/graphs/inventory.yaml").read_text()
ENV = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
DEADLINE = 120.0  # seconds for an observed event under heavy load; never a sleep


def cli(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(data), *args],
        capture_output=True,
        text=True,
        env={**ENV, **env},
        timeout=300,
    )


def ok(data: Path, *args: str) -> str:
    r = cli(data, *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def until(what: str, cond: Any, proc: subprocess.Popen[Any] | None = None) -> Any:
    """Poll ``cond()`` until it is truthy (an observed event), failing after DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        assert time.monotonic() < deadline, f"not observed: {what}"
        time.sleep(0.02)


def _graph(path: Path) -> None:
    with claimgraph.open(path, create=True, graph="platform") as g:
        g.publish_schema(INVENTORY, agent="platform-admin")


# -- serve holds the directory ------------------------------------------------------------------


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str], str]]:
    """``claimgraph serve`` as a real process, once it announced its socket."""
    data = tmp_path / "g"
    _graph(data)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port", str(port),
         "--tick", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
    )  # fmt: skip
    try:

        def announced() -> bool:
            ann = read_announcement(data)
            return ann is not None and ann.pid == proc.pid

        until("serve announced its socket", announced, proc)
        yield data, proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_cli_reads_and_writes_while_serve_runs(
    serving: tuple[Path, subprocess.Popen[str], str],
) -> None:
    """While serve holds the directory every CLI read answers, and writes and admin commands
    are decided by serve itself (its HTTP API sees them), printed as they are locally."""
    data, proc, url = serving
    ann = read_announcement(data)
    assert ann is not None and ann.socket == str((data / SOCKET).resolve())
    assert stat.S_IMODE(os.stat(data / SOCKET).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(data / SOCKET).st_mode)

    # writes, through serve's socket
    r = json.loads(
        ok(data, "assert", "deployment_target", "service:checkout", "environment:prod",
           "--agent", "release-agent", "--task", "promote-release", "--json")
    )  # fmt: skip
    assert (r["kind"], r["reason"], r["version"]) == ("accepted", "new", 1)
    text = ok(data, "assert", "service_owns_database", "service:checkout", "database:orders",
              "--agent", "inventory-agent", "--task", "reconcile-service-topology")  # fmt: skip
    assert text.startswith("v2 ACCEPTED new\n  command ")
    denied = cli(data, "assert", "deployment_target", "service:cart", "environment:prod",
                 "--agent", "intruder", "--task", "promote-release")  # fmt: skip
    assert denied.returncode == 1 and denied.stdout.startswith("v3 REJECTED unauthorized")
    grant = ok(data, "grant", "dba-agent", "*", "--agent", "platform-admin")
    assert grant.startswith("v4 ACCEPTED granted")
    retract = ok(data, "retract", r["command_id"], "--agent", "release-agent", "--json")
    assert json.loads(retract)["kind"] == "retired"

    # serve itself decided them: its HTTP API reads them
    tokens = json.loads((data / "tokens.json").read_text())["tokens"]  # plain JSON
    admin = next(t["token"] for t in tokens if "admin" in t.get("roles", []))
    with claimgraph.connect(url, token=admin) as c:
        assert c.head() == 5
        assert c.edge("service_owns_database", "service:checkout", "database:orders").state == (
            "present"
        )

    # reads, from secondaries, at the version they caught up to
    assert json.loads(ok(data, "head", "--json")) == {"graph": "platform", "head": 5, "pending": 0}
    edge = json.loads(ok(data, "get", "deployment_target", "service:checkout",
                         "environment:prod", "--at", "1", "--json"))  # fmt: skip
    assert (edge["state"], edge["version"]) == ("present", 1)
    assert json.loads(ok(data, "claim", r["command_id"], "--json"))["status"] == "retired"
    assert "orders" in ok(data, "neighbors", "service:checkout")
    assert len(ok(data, "history", "deployment_target", "service:checkout",
                  "environment:prod").splitlines()) == 2  # fmt: skip
    assert [json.loads(x)["version"] for x in ok(data, "log", "--json").splitlines()] == [
        0, 1, 2, 3, 4, 5,
    ]  # fmt: skip
    assert ok(data, "export", "--format", "jsonl").count("service_owns_database") == 1
    assert ok(data, "verify").startswith("verify ok: 6 commands")
    assert ok(data, "audit").startswith("audit ok:")
    assert ok(data, "digest").strip().endswith("version 5")
    assert "decides under rules revision" in ok(data, "rules", "show")
    assert ok(data, "tick").startswith("v6 ACCEPTED")  # through serve, like every write
    assert ok(data, "runs", "list").strip() == "no runs yet"
    assert ok(data, "init", "--graph", "platform").startswith("graph 'platform' in ")
    missing = cli(data, "get", "deployment_target", "service:checkout", "--at", "99")
    assert missing.returncode == 5 and "version 99 is not available" in missing.stderr

    # admin commands, done by serve
    assert ok(data, "checkpoint", "create").startswith("checkpoint ")
    gc = json.loads(ok(data, "gc", "--keep", "2", "--json"))
    assert (gc["horizon"], gc["held_by"]) == (5, None)
    bad = cli(data, "gc", "--horizon", "50")  # serve's error, exactly as it is locally
    assert bad.returncode == 2 and "horizon 50 is above head v6" in bad.stderr
    pin = json.loads(ok(data, "pin", "add", "6", "--json"))
    assert pin["version"] == 6
    assert "horizon v5; 1 live pin(s)" in ok(data, "pin", "list")

    # several writers at once: each gets its own decision, at its own version
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "claimgraph", "--data", str(data), "assert",
             "service_owns_database", f"service:s{i}", f"database:d{i}", "--agent",
             "inventory-agent", "--task", "reconcile-service-topology", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        )
        for i in range(4)
    ]  # fmt: skip
    raced = [json.loads(p.communicate(timeout=300)[0]) for p in racers]
    assert all(p.returncode == 0 for p in racers)
    assert sorted(r["version"] for r in raced) == [7, 8, 9, 10]
    assert {r["kind"] for r in raced} == {"accepted"}

    # what replaces serve's stores needs serve stopped, and says so
    for args in (["rebuild"], ["checkpoint", "restore"]):
        refused = cli(data, *args)
        assert refused.returncode == 8
        assert f"stop that process first (pid {proc.pid}" in refused.stderr

    # no reader left its scratch behind; serve still holds the directory
    assert not (data / READERS).exists() or not any((data / READERS).iterdir())
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert not (data / SOCKET).exists() and not (data / ANNOUNCEMENT).exists()
    assert ok(data, "head").strip() == "platform: head v10"  # the CLI is the writer again


# -- two CLI processes: a read and a write during a 30,000-line submit ---------------------------


def _line(i: int) -> bytes:
    return json.dumps(
        {"type": "assert", "edge_type": "depends_on", "subject": f"service:s{i}",
         "object": f"service:t{i}", "agent": "inventory-agent", "task": "load"}
    ).encode() + b"\n"  # fmt: skip


def test_reads_and_writes_answer_during_a_long_submit(tmp_path: Path) -> None:
    """A read during a 30,000-line submit in another process answers at the version it saw
    (the same answer the graph gives at that version later), and a write goes through the
    submitting process; the submit's own output is untouched."""
    data = tmp_path / "g"
    _graph(data)
    out = (tmp_path / "decisions.jsonl").open("wb")
    submit = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "submit", "-", "--batch", "1000"],
        stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE, env=ENV,
    )  # fmt: skip
    assert submit.stdin is not None
    try:
        submit.stdin.write(b"".join(_line(i) for i in range(15_000)))
        submit.stdin.flush()  # 15 whole batches; the submit holds the directory until EOF
        with claimgraph.open_replica(data) as replica:  # the head, seen through a secondary
            until("the submit decided 15,000 lines", lambda: replica.head() >= 15_000, submit)
        assert read_announcement(data) is not None
        assert read_announcement(data).pid == submit.pid  # type: ignore[union-attr]

        head = json.loads(ok(data, "head", "--json"))
        assert head["head"] >= 15_000 and head["pending"] == 0
        during = json.loads(ok(data, "get", "depends_on", "service:s77", "service:t77", "--json"))
        assert during["state"] == "present" and during["version"] >= 15_000
        logged = [json.loads(x) for x in ok(data, "log", "--from", "14990", "--json").splitlines()]
        assert [d["version"] for d in logged] == list(range(14_990, 15_001))
        assert ok(data, "verify").startswith("verify ok:")
        grant = json.loads(ok(data, "grant", "dba-agent", "*", "--agent", "platform-admin",
                              "--json"))  # fmt: skip
        assert grant["kind"] == "accepted" and grant["version"] > 15_000

        submit.stdin.write(b"".join(_line(i) for i in range(15_000, 30_000)))
        submit.stdin.close()
        assert submit.wait(timeout=600) == 0, submit.stderr.read()  # type: ignore[union-attr]
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
        out.close()
    decided = (tmp_path / "decisions.jsonl").read_bytes().splitlines()
    assert len(decided) == 30_000
    assert all(json.loads(x)["kind"] == "accepted" for x in decided[::997])
    assert not (data / ANNOUNCEMENT).exists() and not (data / SOCKET).exists()
    with claimgraph.open(data) as g:
        assert g.head() == 30_001  # the schema, 30,000 lines and the grant
        later = g.edge("depends_on", "service:s77", "service:t77", at=during["version"])
        assert later.as_dict() | {"claim_details": during["claim_details"]} == during
        assert g.decisions(grant["version"], 1)[0][1]["command_type"] == "grant"


# -- stale announcements ------------------------------------------------------------------------


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _stale(data: Path) -> int:
    pid = _dead_pid()
    (data / ANNOUNCEMENT).write_text(
        json.dumps({"pid": pid, "socket": str(data / SOCKET), "started": 1, "graph": "platform",
                    "protocol": 1})
    )  # fmt: skip
    return pid


def test_stale_writer_json_is_replaced_by_the_next_writer(tmp_path: Path) -> None:
    """A writer.json left by a process that died does not hold anyone up: the next CLI
    command is the writer (it replaces the file, and removes it on exit)."""
    data = tmp_path / "g"
    _graph(data)
    _stale(data)
    out = ok(data, "grant", "dba-agent", "*", "--agent", "platform-admin")
    assert out.startswith("v1 ACCEPTED granted")
    assert not (data / ANNOUNCEMENT).exists()


def test_stale_writer_json_while_the_directory_is_held_is_reported(tmp_path: Path) -> None:
    """Held by a process that takes no writes, with a stale writer.json: reads answer, and a
    write fails with exit 8 naming the stale pid, after a bounded wait (never hangs)."""
    data = tmp_path / "g"
    _graph(data)
    pid = _stale(data)
    with claimgraph.open(data):  # holds the RocksDB locks; announces nothing
        assert ok(data, "head").strip() == "platform: head v0"
        r = cli(data, "grant", "dba-agent", "*", "--agent", "platform-admin",
                CLAIMGRAPH_WRITER_WAIT="0.3")  # fmt: skip
    assert r.returncode == 8
    assert f"{data / ANNOUNCEMENT} is stale: pid {pid} is gone" in r.stderr
    with claimgraph.open(data) as g:
        assert g.head() == 0  # nothing was written


# -- the socket, spoken to directly -------------------------------------------------------------


def _frame(conn: socket.socket) -> Any:
    n = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(conn.recv(n, socket.MSG_WAITALL))


def _ask(path: Path, payload: bytes) -> Any:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(60)  # a writer that never answers fails the test, never hangs it
        conn.connect(str(path / SOCKET))
        hello = _frame(conn)
        assert hello["claimgraph"] == 1 and hello["pid"] == os.getpid()
        conn.sendall(payload)
        return _frame(conn)


def _json(obj: Any) -> bytes:
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[Graph, WriterListener]]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    listener = WriterListener(g, timeout=0.5)
    try:
        yield g, listener
    finally:
        listener.close()
        g.close()


def test_malformed_requests_get_named_errors_and_change_nothing(
    listening: tuple[Graph, WriterListener],
) -> None:
    """Oversized, non-JSON, unknown or ill-typed requests are answered with the error that
    names what is wrong; the graph is unchanged and the writer goes on serving."""
    g, _ = listening
    big = _ask(g.path, struct.pack(">I", MAX_REQUEST + 1))
    assert big["error"]["type"] == "LimitError" and "at most" in big["error"]["message"]
    for payload, words in [
        (struct.pack(">I", 5) + b"{nope", "not JSON"),
        (_json([1, 2]), '"op" string'),
        (_json({"op": "drop_tables"}), "unknown op 'drop_tables'"),
        (_json({"op": "submit", "records": "x"}), "'records' must be a list"),
        (_json({"op": "submit", "records": ["***"]}), "records[0] is not valid base64"),
        (_json({"op": "gc", "horizon": "1"}), "'horizon' must be a 64-bit integer"),
        (_json({"op": "runs", "records": ["AAAA"]}), "not a run event record"),
        (_json({"op": "submit", "records": [""] * (MAX_RECORDS + 1)}), "at most 10000"),
    ]:
        resp = _ask(g.path, payload)
        assert resp["ok"] is False and words in resp["error"]["message"], resp
    assert g.head() == 0
    garbage = _ask(g.path, _json({"op": "submit", "records": ["AAEC"]}))  # bytes 00 01 02
    assert garbage["ok"] is True and g.head() == 1  # recorded as a malformed rejection
    assert g.decisions(1, 1)[0][1]["reason"] == "malformed"


def test_a_client_that_sends_nothing_does_not_hold_the_writer(
    listening: tuple[Graph, WriterListener],
) -> None:
    """A greeted client that never sends its request is dropped after the timeout; close()
    then returns and removes the socket and the announcement."""
    g, listener = listening
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.settimeout(60)
        idle.connect(str(g.path / SOCKET))
        assert _frame(idle)["graph"] == "test"
        assert idle.recv(1) == b""  # the writer hung up on it
        listener.close()
    assert not (g.path / SOCKET).exists() and not (g.path / ANNOUNCEMENT).exists()


def test_a_request_that_trickles_in_is_dropped_at_the_timeout(
    listening: tuple[Graph, WriterListener],
) -> None:
    """The whole request must arrive within the timeout (0.5 s here), however it is paced: a
    client sending one byte at a time is hung up on long before it is done."""
    g, _ = listening
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.settimeout(60)
        slow.connect(str(g.path / SOCKET))
        assert _frame(slow)["graph"] == "test"
        slow.sendall(struct.pack(">I", 1000))
        sent = 0
        while sent < 1000:
            if select.select([slow], [], [], 0)[0] and slow.recv(1) == b"":
                break  # the writer hung up
            try:
                slow.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            time.sleep(0.05)  # the pace of a slow client, not a synchronisation
    assert sent < 1000  # dropped before the end (it would take 50 s)
    assert g.head() == 0


def test_attached_graph_follows_the_writer_and_takes_over_when_it_leaves(tmp_path: Path) -> None:
    """An attached graph writes through the announced writer; once that writer has left, the
    next write opens the directory itself and announces its own socket."""
    long = tmp_path / ("x" * 60) / ("y" * 60)  # too long a path for sockaddr_un
    g = claimgraph.open(long, create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    listener = WriterListener(g)
    a = AttachedGraph(long, "test", writer_wait=30)
    try:
        r = a.grant("dba", "owns", agent="admin")
        assert (r.kind, r.version) == ("accepted", 1)
        assert a.head() == 1 and g.head() == 1
        listener.close()
        g.close()
        r2 = a.grant("dba", "runs_in", agent="admin")
        assert (r2.kind, r2.version) == ("accepted", 2)
        ann = read_announcement(long)
        assert ann is not None and ann.pid == os.getpid()
        assert a.head() == 2
        assert [d["command_type"] for _, d in a.decisions(0, 10)] == [
            "publish_schema", "grant", "grant",
        ]  # fmt: skip
    finally:
        a.close()
    assert not (long / ANNOUNCEMENT).exists() and not (long / READERS).exists()
    with claimgraph.open(long) as again:  # the attached graph closed the writer it became
        assert again.head() == 2


def test_a_killed_readers_scratch_is_swept_by_the_next_reader(tmp_path: Path) -> None:
    """A reader killed before it could clean up (SIGKILL) leaves its secondary's scratch in
    DIR/.readers; the next process that attaches removes it, and its own on exit."""
    data = tmp_path / "g"
    _graph(data)
    with claimgraph.open(data):  # the writer: what follows attaches
        reader = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", "--data", str(data), "mcp", "--agent", "x"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV,
        )  # fmt: skip
        try:
            mine = until(
                "the reader's scratch",
                lambda: list((data / READERS).glob(f"{reader.pid}@*")),
                reader,
            )
        finally:
            reader.kill()
            reader.wait()
        assert mine[0].exists()
        assert ok(data, "head").strip() == "platform: head v0"
        assert not mine[0].exists()
        assert not (data / READERS).exists()


def test_a_directory_that_cannot_hold_the_socket_still_works(tmp_path: Path) -> None:
    """Where the socket cannot be made, the command that opened the directory works on and
    says so on stderr (a structured line), rather than failing."""
    data = tmp_path / "g"
    _graph(data)
    (data / SOCKET).mkdir()  # something else sits where the socket goes
    r = cli(data, "grant", "dba-agent", "*", "--agent", "platform-admin")
    assert r.returncode == 0 and r.stdout.startswith("v1 ACCEPTED granted")
    assert '"event": "writer.no_socket"' in r.stderr and "cannot listen on" in r.stderr


def test_long_submits_are_split_into_requests_within_the_bounds() -> None:
    """A client splits records into requests of at most MAX_RECORDS records and the byte
    bound (base64 and JSON included), in order; a record no request can carry is refused."""
    from claimgraph.errors import LimitError
    from claimgraph.service.local import batches

    records = [bytes([i % 256]) * 300 for i in range(25_000)]
    split = list(batches(records))
    assert [len(b) for b in split] == [10_000, 10_000, 5_000]
    assert [r for b in split for r in b] == records
    small = list(batches(records[:100], max_request=10_000))
    assert all(sum(4 * (len(r) + 2) // 3 + 4 for r in b) + 64 <= 10_000 for b in small)
    assert [r for b in small for r in b] == records[:100] and len(small) > 1
    with pytest.raises(LimitError, match="a record of 9000 bytes"):
        list(batches([b"x" * 9000], max_request=10_000))
