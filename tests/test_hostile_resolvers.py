"""Hostile resolver inputs: CEL that would run for hours, arbiters that flood, nest or linger.

Every case ends in a verdict or a recorded reason the chain moved on, within its limit. The
schemas and arbiter scripts are data files under ``tests/data/hostile/`` (see its README).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.rules import RuleLimits, evaluate
from claimgraph.errors import ArbiterError, RuleError
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from claimgraph.service.resolvers import (
    RESOLVER_LIMITS,
    CommandArbiter,
    HttpArbiter,
    ResolverLimits,
    run_resolvers,
)
from tests.conftest import ROOT
from tests.test_cli import _run

DATA = ROOT / "tests" / "data" / "hostile"
ARBITERS = DATA / "arbiters"
PAYLOAD = {"claims": [{"claim_id": "c-1", "confidence": 0.5}, {"claim_id": "c-2"}]}


def _conflict(tmp_path: Path, schema: str, claims: int = 10) -> Graph:
    """A graph with one quarantined slot holding ``claims`` claims; the last is confident."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="payments")
    r = g.publish_schema(schema, agent="payments-admin")
    assert r.kind == "accepted", r.decision["detail"]
    for i in range(claims):
        conf = 0.95 if i == claims - 1 else 0.5
        g.assert_("routed_to", "ticket:t1", f"team:t{i}", agent=f"triage-{i}", confidence=conf)
    assert len(g.quarantine()) == 1
    return g


# -- CEL --------------------------------------------------------------------------------------


def test_an_exponential_rule_stops_at_its_step_limit_and_the_chain_moves_on(
    tmp_path: Path,
) -> None:
    """cel-nested.yaml's first rule (10^6 inner evaluations over 10 claims) is stopped by the
    step limit; it is recorded as passed with the limit named, and the next rule resolves;
    verify and audit pass."""
    g = _conflict(tmp_path, (DATA / "cel-nested.yaml").read_text())
    [(_, v, r)] = run_resolvers(g, agent="resolver-bot")
    assert (v.resolver, r.kind) == ("rules:confident", "resolved")
    [passed] = v.inputs["passed"]
    assert passed["resolver"] == "rules:explode"
    assert f"more than {RESOLVER_LIMITS.rules.max_steps} evaluation steps" in passed["why"]
    verify(g)
    audit(g)
    g.close()


def test_cel_limits_are_counted_not_timed() -> None:
    """The same expression passes with steps to spare and fails one step short: the limit is
    a count of evaluation steps, the same on every machine; values and inputs are bounded."""
    claims = [{"claim_id": f"c{i}", "confidence": 0.5} for i in range(3)]
    expr = "claims.all(a, claims.all(b, a.confidence <= 1.0))"
    steps = next(
        n for n in range(1, 2000) if _passes(expr, {"claims": claims}, RuleLimits(max_steps=n))
    )
    assert steps > 9  # 3 x 3 inner evaluations, several steps each
    assert not _passes(expr, {"claims": claims}, RuleLimits(max_steps=steps - 1))
    with pytest.raises(RuleError, match="a value of 131072 elements"):
        evaluate(
            "[" + ",".join(map(str, range(17))) + '].reduce(r, i, "ab", r + r)',
            {},
            RuleLimits(max_value=100_000, max_steps=10**9),
        )
    with pytest.raises(RuleError, match="bytes of JSON"):
        evaluate("true", {"claims": ["x" * 2000]}, RuleLimits(max_input=1000))


def _passes(expr: str, activation: dict[str, Any], limits: RuleLimits) -> bool:
    try:
        evaluate(expr, activation, limits)
    except RuleError:
        return False
    return True


def test_resolvers_run_takes_the_cel_step_limit_as_an_option(tmp_path: Path) -> None:
    """claimgraph resolvers run --cel-max-steps 30: even the small confident rule is stopped,
    so the conflict goes to a human, and the reason names the limit."""
    g = _conflict(tmp_path, (DATA / "cel-nested.yaml").read_text(), claims=3)
    g.close()
    r = _run(
        ["--data", str(tmp_path / "g"), "resolvers", "run", "--agent", "resolver-bot",
         "--cel-max-steps", "30", "--json"],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    [out] = [json.loads(line) for line in r.stdout.splitlines()]
    assert out["resolver"] == "human"
    whys = [p["why"] for p in out["inputs"]["passed"]]
    assert all("more than 30 evaluation steps" in w for w in whys), whys


def test_schema_check_says_what_publishing_says(tmp_path: Path) -> None:
    """For the 18 KB rule of cel-18k.yaml, `schema check` and a publish_schema decision agree:
    both accept it, or both refuse it and check prints the problems the decision records."""
    doc = (DATA / "cel-18k.yaml").read_text()
    check = _run(["schema", "check", str(DATA / "cel-18k.yaml")], tmp_path)
    g = claimgraph.open(tmp_path / "g", create=True, graph="payments")
    d = g.publish_schema(doc, agent="payments-admin").decision
    g.close()
    assert (check.returncode == 0) == (d["kind"] == "accepted"), (check.stderr, d["detail"])
    if check.returncode != 0:
        assert check.returncode == 3
        for line in d["detail"].splitlines():
            assert line.split(": ", 1)[-1] in check.stderr, line


# -- arbiters ---------------------------------------------------------------------------------


def test_a_flooding_arbiter_is_read_incrementally_and_cut_at_the_cap(tmp_path: Path) -> None:
    """An arbiter that writes forever is refused once its answer passes max_output; it was
    killed having written no more than the cap plus what the pipe holds."""
    count = tmp_path / "written"
    arb = CommandArbiter(
        [sys.executable, str(ARBITERS / "flood.py"), str(count)], max_output=256 * 1024
    )
    with pytest.raises(ArbiterError, match="answered more than 262144 bytes"):
        arb.arbitrate(PAYLOAD)
    assert int(count.read_text()) <= 256 * 1024 + 4 * 65536  # + a chunk, + the pipe buffer


def test_a_deeply_nested_answer_is_refused_before_parsing() -> None:
    """An answer nested 100,000 deep is an ArbiterError naming the depth (it crashed the
    chain with RecursionError)."""
    arb = CommandArbiter([sys.executable, str(ARBITERS / "deep.py")])
    with pytest.raises(ArbiterError, match="nested more than 32 deep"):
        arb.arbitrate(PAYLOAD)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A FIFO and its read end (opened first, non-blocking, so writers never wait)."""
    path = tmp_path / "held"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    yield path, fd
    os.close(fd)


def _until_eof(fd: int) -> bytes:
    """Everything written to the FIFO, read until every writer has gone (blocking)."""
    os.set_blocking(fd, True)
    out = b""
    while chunk := os.read(fd, 4096):
        out += chunk
    return out


@pytest.mark.timeout(120)
def test_nothing_an_arbiter_started_outlives_its_answer(fifo: tuple[Path, int]) -> None:
    """orphan.py answers but leaves a child holding a FIFO: once the answer is read, the
    whole process group is killed, so the FIFO reaches end-of-file (the child said ready)."""
    path, fd = fifo
    arb = CommandArbiter([sys.executable, str(ARBITERS / "orphan.py"), str(path), "answer"])
    assert arb.arbitrate(PAYLOAD)["winner"] == "c-1"
    assert _until_eof(fd) == b"ready\n"


@pytest.mark.timeout(120)
def test_a_timed_out_arbiter_dies_with_its_children(fifo: tuple[Path, int]) -> None:
    """orphan.py never answers: at the timeout it and the child it started are killed (the
    FIFO the child holds reaches end-of-file); the error names the timeout."""
    path, fd = fifo
    arb = CommandArbiter(
        [sys.executable, str(ARBITERS / "orphan.py"), str(path), "hang"], timeout=5.0
    )
    with pytest.raises(ArbiterError, match="no answer within 5s"):
        arb.arbitrate(PAYLOAD)
    assert _until_eof(fd) == b"ready\n"


class _Flood(BaseHTTPRequestHandler):
    """Answers: /flood 64 MiB (chunked), /declared a Content-Length of 2 GiB, /deep nesting."""

    written: int = 0
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        if self.path == "/declared":
            self.send_header("content-length", str(2**31))
            self.end_headers()
            return
        if self.path == "/deep":
            body = b"[" * 50_000 + b"]" * 50_000
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        chunk = b" " * 65536
        try:
            for _ in range(1024):  # 64 MiB
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                type(self).written += len(chunk)
        except OSError:
            return  # the client hung up

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flood_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_http_arbiter_bodies_are_capped(flood_server: str) -> None:
    """An HTTP arbiter streaming 64 MiB is cut at max_output (the server could write little
    more than the cap before the client hung up); a declared 2 GiB body is refused unread;
    a deeply nested body is refused before parsing."""
    _Flood.written = 0
    with pytest.raises(ArbiterError, match="answered more than 1048576 bytes"):
        HttpArbiter(f"{flood_server}/flood").arbitrate(PAYLOAD)
    with pytest.raises(ArbiterError, match="would answer 2147483648 bytes"):
        HttpArbiter(f"{flood_server}/declared").arbitrate(PAYLOAD)
    with pytest.raises(ArbiterError, match="nested more than 32 deep"):
        HttpArbiter(f"{flood_server}/deep").arbitrate(PAYLOAD)
    assert _Flood.written < 64 * 1024 * 1024


def test_a_schema_arbiter_timeout_is_capped(tmp_path: Path) -> None:
    """ResolverLimits.max_timeout caps the timeout a schema gives its arbiter: the conflict of
    a hanging arbiter passes to a human after the cap, not the schema's ten minutes."""
    schema = (DATA / "cel-nested.yaml").read_text()
    script = ARBITERS / "orphan.py"
    fifo_path = tmp_path / "held"
    os.mkfifo(fifo_path)
    fd = os.open(fifo_path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        schema = schema.replace(
            "      - rules:",
            f"      - arbiter: {{name: slow, timeout: 600, command: "
            f"[{sys.executable}, {script}, {fifo_path}, hang]}}\n      - rules:",
        )
        g = _conflict(tmp_path, schema, claims=2)
        limits = ResolverLimits(max_timeout=3.0)
        [(_, v, r)] = run_resolvers(g, agent="resolver-bot", limits=limits)
        assert v.inputs["passed"][0]["resolver"] == "arbiter:slow"
        assert "no answer within 3s" in v.inputs["passed"][0]["why"]
        assert r.kind in ("resolved", "accepted")
        assert _until_eof(fd) == b"ready\n"
        g.close()
    finally:
        os.close(fd)


class _Verbose:
    """A fake arbitration agent that picks the first claim and explains at great length."""

    name = "verbose"

    def arbitrate(self, payload: Any) -> Any:
        return {"winner": payload["claims"][0]["claim_id"], "rationale": "because " * 100_000}


def test_a_verbose_arbiter_verdict_still_lands(tmp_path: Path) -> None:
    """A 700 KB answer (within max_output) is recorded by its verdict keys, the start of its
    rationale and its digest, so the resolve command fits the governor's limit on inputs and
    is decided (it was rejected as field_too_large, and retried, every pass)."""
    schema = (
        (DATA / "cel-nested.yaml")
        .read_text()
        .replace(
            "      - rules:",
            f"      - arbiter: {{name: verbose, command: [{sys.executable}]}}\n      - rules:",
        )
    )
    g = _conflict(tmp_path, schema, claims=2)
    [(_, v, r)] = run_resolvers(g, agent="resolver-bot", arbiters={"verbose": _Verbose()})
    assert (v.resolver, r.kind) == ("arbiter:verbose", "resolved"), r.decision["detail"]
    kept = v.inputs["answer"]
    assert kept["truncated"]["bytes"] > 700_000 and len(kept["rationale"]) == 1000
    g.close()
