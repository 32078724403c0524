"""Resolvers on a served graph: over HTTP, in ``serve``'s worker, and only allow-listed arbiters."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.wire import schema_dir
from claimgraph.errors import ConfigError
from claimgraph.http.app import create_app
from claimgraph.http.auth import TokenFile
from claimgraph.service.arbiters import ArbiterAllowList
from claimgraph.service.graph import Graph
from claimgraph.service.resolver_worker import ResolverWorker
from claimgraph.service.resolvers import run_resolvers
from tests.conftest import ROOT
from tests.test_review_page import _free_port

REFUNDS = (schema_dir().parent / "graphs" / "refunds.yaml").read_text(encoding="utf-8")
TOKENS = {
    "payments-admin": ("admin-token-0000000000", ["admin"]),
    "resolver-bot": ("resolver-token-00000000", ["resolver"]),
    "triage-1": ("triage-1-token-00000000", []),
    "triage-2": ("triage-2-token-00000000", []),
    "fraud-agent": ("fraud-token-00000000000", []),
    "experience-agent": ("experience-token-000000", []),
}

# an arbiter a hostile admin names: running it would leave MARKER behind
ROUTING = """
principals: {admins: [payments-admin], resolvers: [resolver-bot, "human:*"]}
node_types: [ticket, team]
edge_types:
  - name: routed_to
    subject: ticket
    object: team
    writers: [{agent: "triage-*"}]
    cardinality: many-to-one
    conflict_policy: quarantine
    resolvers:
      - arbiter: {name: judge, command: [PYTHON, -c, "open('MARKER_JUDGE', 'w')"]}
      - human
  - name: paged
    subject: ticket
    object: team
    writers: [{agent: "triage-*"}]
    cardinality: many-to-one
    conflict_policy: quarantine
    resolvers:
      - arbiter: {name: evil, command: [PYTHON, -c, "open('MARKER_EVIL', 'w')"]}
      - human
"""

# the operator's arbiter: picks the most confident claim, and says it ran
JUDGE = """
import json, sys
payload = json.load(sys.stdin)
open(sys.argv[1], "w").write(payload["conflict_id"])
best = max(payload["claims"], key=lambda c: c["confidence"])
print(json.dumps({"winner": best["claim_id"], "rationale": "most confident"}))
"""


def _tokens(path: Path) -> Path:
    entries = [{"agent": a, "token": t, "roles": r} for a, (t, r) in TOKENS.items()]
    path.write_text(json.dumps({"tokens": entries}))
    return path


def _token_file() -> TokenFile:
    return TokenFile.parse(json.dumps({"tokens": [
        {"agent": a, "token": t, "roles": r} for a, (t, r) in TOKENS.items()
    ]}))  # fmt: skip


@pytest.fixture
def refunds(tmp_path: Path) -> Iterator[Graph]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="payments")
    assert g.publish_schema(REFUNDS, agent="payments-admin").kind == "accepted"
    yield g
    g.close()


def _refund(g: Any, rid: str, verdict: str, agent: str, conf: float) -> Any:
    return g.assert_(
        "refund_decision", f"refund:{rid}", f"verdict:{verdict}", agent=agent, confidence=conf
    )


def test_run_resolvers_and_escalation_work_over_http(refunds: Graph) -> None:
    """run_resolvers through the HTTP SDK (the real app) settles conflicts as it does embedded;
    it used to raise AttributeError (it read ``graph.reader``, which only local graphs have)."""
    app = create_app(refunds, _token_file())
    _refund(refunds, "R-1", "BLOCK_TRANSACTION", "fraud-agent", 0.6)
    a = _refund(refunds, "R-1", "APPROVE", "experience-agent", 0.9)
    _refund(refunds, "R-2", "REJECT", "fraud-agent", 0.45)
    b = _refund(refunds, "R-2", "APPROVE", "experience-agent", 0.52)
    cids = {a.decision["conflict_id"], b.decision["conflict_id"]}
    with claimgraph.connect("http://x", token=TOKENS["resolver-bot"][0], app=app) as c:
        for cid in cids:
            assert c.escalation(cid) == refunds.escalation(cid)
        done = {cid: (v, r) for cid, v, r in run_resolvers(c, agent="resolver-bot")}
        assert set(done) == cids
        v, r = done[a.decision["conflict_id"]]
        assert (v.resolver, r.kind) == ("rules:block-wins", "resolved")
        v, r = done[b.decision["conflict_id"]]
        assert (v.resolver, r.reason) == ("rules:low-confidence", "escalated")
        assert run_resolvers(c, agent="resolver-bot") == []  # nothing left open and unescalated
    assert refunds.slot("refund_decision", "refund:R-1").nodes == (
        ("verdict", "BLOCK_TRANSACTION"),
    )


def test_an_arbiter_not_on_the_allow_list_is_never_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A schema's arbiter command is never run by a server: with an empty allow-list the
    worker passes it, the conflict escalates to a person and the reason says why."""
    marker = tmp_path / "ran"
    schema = ROUTING.replace("PYTHON", sys.executable).replace("MARKER_EVIL", str(marker))
    with claimgraph.open(tmp_path / "g", create=True, graph="ops") as g:
        assert g.publish_schema(schema, agent="payments-admin").kind == "accepted"
        g.assert_("paged", "ticket:t1", "team:a", agent="triage-1")
        r = g.assert_("paged", "ticket:t1", "team:b", agent="triage-2")
        caplog.set_level(logging.INFO, logger="claimgraph.resolvers")
        worker = ResolverWorker(g, allowed=ArbiterAllowList.parse([]))
        [(cid, v, receipt)] = worker.step(g.head())
        assert cid == r.decision["conflict_id"]
        assert (v.resolver, receipt.reason) == ("human", "escalated")
        assert not marker.exists()
        [p] = g.escalations()
        assert "arbiter 'evil' is not on this server's allow-list" in p["escalation_reason"]
        passed = [r.msg.fields for r in caplog.records if r.msg.name == "resolvers.passed"]
        assert [(p["conflict"], p["resolver"]) for p in passed] == [(cid, "arbiter:evil")]
        assert "arbiter 'evil' is not on this server's allow-list" in passed[0]["why"]


def test_allow_list_flags_and_file(tmp_path: Path) -> None:
    """--arbiter NAME=CMD|URL and DATA/arbiters.json; a bad entry is a named ConfigError."""
    f = tmp_path / "arbiters.json"
    f.write_text(json.dumps({"arbiters": {
        "judge": {"command": ["python3", "judge.py"], "timeout": 5},
        "llm": {"url": "http://127.0.0.1:9/v"},
    }}))  # fmt: skip
    a = ArbiterAllowList.parse(["judge=python3 'my judge.py' --fast"], f)
    judge, llm = a.get("judge"), a.get("llm")
    assert judge is not None and judge.command == ("python3", "my judge.py", "--fast")
    assert judge.timeout is None  # the flag replaced the file's entry
    assert llm is not None and llm.url == "http://127.0.0.1:9/v"
    assert a.get("evil") is None
    for flags, text, message in [
        (["judge"], None, "expected NAME=COMMAND or NAME=URL"),
        (["=x"], None, "is not a name"),
        (["j=  "], None, "names no command or URL"),
        ([], '{"arbiters": {"j": {"command": "rm -rf /"}}}', "expected a non-empty list"),
        ([], '{"arbiters": {"j": {"url": "file:///etc"}}}', "expected an http(s) URL"),
        ([], '{"arbiters": {"j": {"url": "http://x", "timeout": 0}}}', "timeout must be"),
        ([], "[1]", "expected {"),
        ([], "{", "not JSON"),
    ]:
        if text is not None:
            f.write_text(text)
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            ArbiterAllowList.parse(flags, f if text is not None else None)


def test_the_worker_wakes_on_new_decisions_and_settles(refunds: Graph) -> None:
    """Started in a thread, the worker resolves a conflict once it lands, then a pass at its
    own verdict finds nothing more to do: it writes nothing else."""
    worker = ResolverWorker(refunds, allowed=ArbiterAllowList.parse([]), wake=0.2)
    stop = threading.Event()
    t = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    t.start()
    try:
        assert worker.wait_passed(0, 30)
        _refund(refunds, "R-9", "BLOCK_TRANSACTION", "fraud-agent", 0.6)
        r = _refund(refunds, "R-9", "APPROVE", "experience-agent", 0.9)
        verdict = refunds.wait_for(r.version + 1, 30)  # the worker's verdict lands
        assert worker.wait_passed(verdict, 30)  # and it looked again at its own verdict
        assert refunds.head() == verdict == r.version + 1
        [(cid, v, receipt)] = worker.verdicts
        assert (cid, v.resolver, receipt.kind) == (
            r.decision["conflict_id"], "rules:block-wins", "resolved",
        )  # fmt: skip
        assert receipt.decision["agent"] == "resolver-bot"  # the schema's resolver principal
    finally:
        stop.set()
        t.join(30)


def _wait_up(proc: subprocess.Popen[str], url: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.1)


def test_serve_runs_resolvers_and_only_its_own_arbiters(tmp_path: Path) -> None:
    """A real serve process: an admin's schema names two arbiter commands. The one the operator
    allowed by name runs as the operator defined it (not the schema's command); the other never
    runs, and its conflict is escalated with the reason."""
    judge_ran, schema_ran, evil_ran = tmp_path / "judge", tmp_path / "schema", tmp_path / "evil"
    script = tmp_path / "judge.py"
    script.write_text(JUDGE)
    schema = (
        ROUTING.replace("PYTHON", sys.executable)
        .replace("MARKER_JUDGE", str(schema_ran))
        .replace("MARKER_EVIL", str(evil_ran))
    )
    data = tmp_path / "g"
    claimgraph.open(data, create=True, graph="ops").close()
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port", str(port),
         "--tokens", str(_tokens(tmp_path / "tokens.json")),
         "--arbiter", f"judge={sys.executable} {script} {judge_ran}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(proc, url)
        with claimgraph.connect(url, token=TOKENS["payments-admin"][0]) as admin:
            assert admin.publish_schema(schema, agent="payments-admin").kind == "accepted"
        t1 = claimgraph.connect(url, token=TOKENS["triage-1"][0])
        t2 = claimgraph.connect(url, token=TOKENS["triage-2"][0])
        t1.assert_("routed_to", "ticket:t1", "team:a", agent="triage-1", confidence=0.3)
        routed = t2.assert_("routed_to", "ticket:t1", "team:b", agent="triage-2", confidence=0.9)
        t1.assert_("paged", "ticket:t1", "team:a", agent="triage-1")
        paged = t2.assert_("paged", "ticket:t1", "team:b", agent="triage-2")
        assert routed.kind == paged.kind == "quarantined"
        wanted = {routed.decision["conflict_id"], paged.decision["conflict_id"]}
        verdicts: dict[str, Any] = {}
        while set(verdicts) != wanted:  # each new decision is observed, until both verdicts
            head = t1.head()
            for _, d in t1.decisions(routed.version + 1, 100):
                if d["command_type"] in ("resolve", "escalate"):
                    verdicts[d["conflict_id"]] = d
            if set(verdicts) != wanted:
                t1.wait_for(head + 1, timeout=30)
        r = verdicts[routed.decision["conflict_id"]]
        assert (r["kind"], r["released"], r["agent"]) == (
            "resolved", [routed.command_id], "resolver-bot",
        )  # fmt: skip
        assert judge_ran.read_text() == routed.decision["conflict_id"]  # the operator's judge
        e = verdicts[paged.decision["conflict_id"]]
        assert e["reason"] == "escalated"
        assert "arbiter 'evil' is not on this server's allow-list" in e["detail"]
        [p] = t1.escalations()
        assert "not on this server's allow-list" in p["escalation_reason"]
        t1.close()
        t2.close()
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert not schema_ran.exists() and not evil_ran.exists()  # no schema command ever ran
    assert "resolvers on (arbiters allowed: judge)" in out
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    passed = [(e["resolver"], e["why"]) for e in events if e["event"] == "resolvers.passed"]
    assert [r for r, _ in passed] == ["arbiter:evil"]
    assert "arbiter 'evil' is not on this server's allow-list" in passed[0][1]
    assert [e for e in events if e["level"] not in ("info", "debug")] == []


def test_plain_claims_cost_the_worker_no_pass(refunds: Graph) -> None:
    """Decisions that touch no conflict (and not the schema) wake the worker but run no scan;
    one that opens a conflict does."""
    worker = ResolverWorker(refunds, allowed=ArbiterAllowList.parse([]))
    assert worker.look() and worker.passes == 1  # the first look always passes
    for i in range(20):
        assert _refund(refunds, f"R-{i}", "REJECT", "fraud-agent", 0.7).kind == "accepted"
        assert not worker.look()
    assert worker.passes == 1
    _refund(refunds, "R-1", "BLOCK_TRANSACTION", "risk-control-agent", 0.7)
    assert worker.look() and worker.passes == 2
    [(_, v, r)] = worker.verdicts
    assert (v.resolver, r.kind) == ("rules:block-wins", "resolved")
    assert worker.look() and not worker.look()  # its own verdict: one more look, then quiet
    assert worker.passes == 3 and len(worker.verdicts) == 1
    assert worker._seen == {}  # what it remembers is bounded by the open conflicts


def test_serve_refuses_a_bad_allow_list_before_serving(tmp_path: Path) -> None:
    """A malformed --arbiter or arbiters.json stops serve with exit 2 and the reason."""
    data = tmp_path / "g"
    claimgraph.open(data, create=True, graph="ops").close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port", "9"]
    r = subprocess.run([*cmd, "--arbiter", "judge"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "expected NAME=COMMAND or NAME=URL" in r.stderr, r.stderr
    (data / "arbiters.json").write_text('{"arbiters": {"j": {"url": "file:///etc/passwd"}}}')
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "arbiters.json: arbiters.j.url: expected" in r.stderr, r.stderr


def test_a_schema_url_is_never_called_unless_allowed(tmp_path: Path) -> None:
    """An admin's schema cannot make the server POST to a URL it names (an internal service,
    say): not on the allow-list, no request is made; allowed by name, the operator's URL is."""
    from http.server import BaseHTTPRequestHandler, HTTPServer

    hits: list[str] = []

    class Arbiter(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["content-length"])))
            hits.append(self.path)
            body = json.dumps({"winner": payload["claims"][0]["claim_id"]}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Arbiter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    schema = ROUTING.replace(
        "command: [PYTHON, -c, \"open('MARKER_EVIL', 'w')\"]", f"url: '{base}/internal'"
    )
    assert f"{base}/internal" in schema
    try:
        with claimgraph.open(tmp_path / "g", create=True, graph="ops") as g:
            assert g.publish_schema(schema, agent="payments-admin").kind == "accepted"
            g.assert_("paged", "ticket:t1", "team:a", agent="triage-1")
            g.assert_("paged", "ticket:t1", "team:b", agent="triage-2")
            g.assert_("paged", "ticket:t2", "team:a", agent="triage-1")
            g.assert_("paged", "ticket:t2", "team:b", agent="triage-2")
            done = ResolverWorker(g, allowed=ArbiterAllowList.parse([])).step(g.head())
            assert [(v.resolver, r.reason) for _, v, r in done] == [("human", "escalated")] * 2
            assert hits == []  # nothing was asked of the schema's URL
            reasons = [p["escalation_reason"] for p in g.escalations()]
            assert len(reasons) == 2
            assert all("arbiter 'evil' is not on this server's allow-list" in x for x in reasons)
        with claimgraph.open(tmp_path / "h", create=True, graph="ops") as h:
            assert h.publish_schema(schema, agent="payments-admin").kind == "accepted"
            h.assert_("paged", "ticket:t1", "team:a", agent="triage-1")
            h.assert_("paged", "ticket:t1", "team:b", agent="triage-2")
            allowed = ArbiterAllowList.parse([f"evil={base}/operators-choice"])
            [(_, v, r)] = ResolverWorker(h, allowed=allowed).step(h.head())
            assert (v.resolver, r.kind) == ("arbiter:evil", "resolved")
            assert hits == ["/operators-choice"]
    finally:
        server.shutdown()
