"""Tokens as an operator meets them: the file serve writes, ``token add``, reload without restart.

The end-to-end tests run ``claimgraph serve`` as a process over each shipped graph schema and
resolve a quarantined conflict with the resolver token serve generated; a person's token is
added with ``claimgraph token add`` while serve runs and used at once, without a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import claimgraph
from claimgraph.errors import ConfigError
from claimgraph.http.auth import TokenFile, generate_token_file
from claimgraph.http.tokens import WatchedTokenFile, add_token
from tests.conftest import ROOT
from tests.test_review_page import _free_port

ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *args],
        capture_output=True, text=True, env=ENV, timeout=120,
    )  # fmt: skip


# -- the file -------------------------------------------------------------------------------


def test_generated_token_file_is_plain_json(tmp_path: Path) -> None:
    """A tokens.json serve writes is valid JSON from its first byte, mode 600."""
    path = tmp_path / "tokens.json"
    tokens = generate_token_file(path, [{"agent": "ops", "roles": ["admin"]}])
    doc = json.loads(path.read_text())
    assert doc["tokens"][0]["agent"] == "ops" and doc["tokens"][0]["token"] == tokens["ops"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_old_commented_file_is_read_then_rewritten_as_json(tmp_path: Path) -> None:
    """The '#'-commented file older versions wrote is accepted once and migrated."""
    path = tmp_path / "tokens.json"
    body = json.dumps({"tokens": [{"agent": "ops", "roles": ["admin"], "token": "t-ops"}]})
    path.write_text("# claimgraph bearer tokens: keep this file private.\n" + body + "\n")
    assert TokenFile.load(path).legacy
    lines: list[str] = []
    wf = WatchedTokenFile(path, report=lines.append)
    p = wf.principal("t-ops")
    assert p is not None and p.agent == "ops"
    assert json.loads(path.read_text())["tokens"][0]["agent"] == "ops"  # plain JSON now
    assert any("plain JSON" in line for line in lines)
    with pytest.raises(ConfigError, match="not JSON"):
        TokenFile.parse("# only a comment\nnot json", "x.json")


def test_add_token_stores_only_its_digest_and_refuses_bad_input(tmp_path: Path) -> None:
    """token add: a fresh token that works, kept only as SHA-256; patterns, unknown roles
    and a second token for one agent (without --replace) are refused."""
    path = tmp_path / "tokens.json"
    t = add_token(path, "human:alice", roles=["resolver"], tasks=["review-*"])
    assert t not in path.read_text()
    p = TokenFile.load(path).principal(t)
    assert p is not None and p.agent == "human:alice" and p.resolver
    assert p.may_act_in("review-q3") and not p.may_act_in("deploy")
    with pytest.raises(ConfigError, match="pattern"):
        add_token(path, "human:*", roles=["resolver"])
    with pytest.raises(ConfigError, match="roles are"):
        add_token(path, "bob", roles=["human"])
    with pytest.raises(ConfigError, match="already has a token"):
        add_token(path, "human:alice")
    t2 = add_token(path, "human:alice", roles=["resolver"], replace=True)
    tf = TokenFile.load(path)
    assert tf.principal(t) is None and tf.principal(t2) is not None


def test_watched_file_follows_changes_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    """A new token works at the next lookup; a broken file is reported and changes nothing."""
    path = tmp_path / "tokens.json"
    first = add_token(path, "ops", roles=["admin"])
    lines: list[str] = []
    wf = WatchedTokenFile(path, report=lines.append)
    second = add_token(path, "human:bo", roles=["resolver"])
    assert wf.principal(second) is not None  # no reload call: the file's stamp changed
    path.write_text('{"tokens": [')  # a half-written edit
    assert wf.principal(first) is not None and wf.principal(second) is not None
    assert sum("token file refused" in line for line in lines) == 1  # said once, not per call
    add_token(path.with_name("other.json"), "x")  # unrelated file: no effect
    path.write_text(json.dumps({"tokens": []}))
    assert wf.principal(first) is None  # revoked by removing it


# -- serve over the shipped schemas ---------------------------------------------------------


class Serve:
    """``claimgraph serve`` as a process; its output lines as they come."""

    def __init__(self, data: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", "--data", str(data), "serve",
             "--port", str(self.port), "--tick", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
        )  # fmt: skip
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append("<exit>")
            self.cond.notify_all()

    def wait_line(self, pred: Callable[[str], bool], start: int = 0) -> str:
        """The first output line from ``start`` on that satisfies ``pred`` (waits for it)."""
        with self.cond:
            ok = self.cond.wait_for(
                lambda: any(pred(x) or x == "<exit>" for x in self.lines[start:]), timeout=60
            )
            found = [x for x in self.lines[start:] if pred(x)]
            assert ok and found, "\n".join(self.lines)
            return found[0]


@contextmanager
def serving(data: Path) -> Iterator[Serve]:
    s = Serve(data)
    try:
        s.wait_line(lambda x: x.startswith("  tokens"))  # printed just before uvicorn starts
        deadline = time.monotonic() + 60
        while True:  # the port opens after the banner: poll the socket (bounded)
            assert s.proc.poll() is None, "\n".join(s.lines)
            try:
                if httpx.get(f"{s.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.05)  # between polls only: not a wait for an outcome
        yield s
    finally:
        s.proc.send_signal(signal.SIGINT)
        s.proc.wait(timeout=30)


def _resolve(url: str, token: str, conflict: str, winner: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/commands/resolve",
        json={"conflict_id": conflict, "winner": winner, "rationale": "checked"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def _quarantine(g: Any, first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, str]:
    """Two conflicting claims (edge type, subject, object, agent, task); (conflict, 1st id)."""
    a = g.assert_(*first[:3], agent=first[3], task=first[4], confidence=0.8)
    b = g.assert_(*second[:3], agent=second[3], task=second[4], confidence=0.8)
    assert a.kind == "accepted" and b.kind == "quarantined", (a.decision, b.decision)
    return b.decision["conflict_id"], a.command_id


SHIPPED = {
    "inventory.yaml": dict(
        graph="platform",
        admin="platform-admin",
        resolver="sre-oncall",
        first=(
            "service_owns_database",
            "service:checkout",
            "database:orders",
            "inventory-agent",
            "reconcile-service-topology",
        ),
        second=(
            "service_owns_database",
            "service:billing",
            "database:orders",
            "dba-agent",
            "audit-q3",
        ),
    ),
    "refunds.yaml": dict(
        graph="payments",
        admin="payments-admin",
        resolver="resolver-bot",
        first=("refund_decision", "refund:r1", "verdict:REJECT", "risk-control-agent", "t"),
        second=("refund_decision", "refund:r1", "verdict:APPROVE", "experience-agent", "t"),
    ),
}


@pytest.mark.parametrize("schema_file", sorted(SHIPPED))
def test_generated_resolver_token_resolves_with_each_shipped_schema(
    tmp_path: Path, schema_file: str
) -> None:
    """serve's tokens are the schema's principals: its resolver token resolves a quarantined
    claim; it says how to add a token per person for 'human:*'; a person's token added with
    `claimgraph token add` while serve runs works at once; SIGHUP reloads the file."""
    case = SHIPPED[schema_file]
    data = tmp_path / "g"
    doc = (ROOT / "schemas/graphs" / schema_file).read_text()
    with claimgraph.open(data, create=True, graph=case["graph"]) as g:
        assert g.publish_schema(doc, agent=case["admin"]).kind == "accepted"
        conflict, first = _quarantine(g, case["first"], case["second"])
        # a second conflict, for the person whose token is added later
        other = tuple(x.replace("r1", "r2").replace("orders", "ledger") for x in case["first"])
        conflict2, first2 = _quarantine(
            g, other, tuple(x.replace("r1", "r2").replace("orders", "ledger")
                            for x in case["second"])
        )  # fmt: skip
    with serving(data) as s:
        created = s.wait_line(lambda x: x.startswith("created "))
        assert f"{case['admin']} (admin)" in created and f"{case['resolver']} (resolver)" in created
        hint = s.wait_line(lambda x: "'human:*' is a pattern" in x)
        assert "token add human:NAME --role resolver" in hint
        doc_tokens = json.loads((data / "tokens.json").read_text())["tokens"]
        tokens = {e["agent"]: e["token"] for e in doc_tokens}
        assert set(tokens) == {case["admin"], case["resolver"]}

        r = _resolve(s.url, tokens[case["resolver"]], conflict, first)
        assert r.status_code == 200, r.text
        assert r.json()["decision"]["kind"] == "resolved"

        mark = len(s.lines)
        added = _cli("--data", str(data), "token", "add", "human:alice", "--role", "resolver")
        assert added.returncode == 0, added.stderr
        alice = added.stdout.strip().splitlines()[-1]
        assert alice not in (data / "tokens.json").read_text()
        listed = _cli("--data", str(data), "token", "list").stdout
        assert "human:alice  tasks *  roles resolver" in listed
        assert case["resolver"] in listed and alice not in listed
        # the person may pick the approving claim (a fail-closed domain needs a human for it)
        members = httpx.get(
            f"{s.url}/v1/conflicts/{conflict2}",
            headers={"Authorization": f"Bearer {alice}"},
            timeout=30,
        ).json()["members"]
        winner = next(c for c in members if c != first2)
        r = _resolve(s.url, alice, conflict2, winner)
        assert r.status_code == 200, r.text
        assert (r.json()["decision"]["kind"], r.json()["decision"]["agent"]) == (
            "resolved",
            "human:alice",
        )
        s.wait_line(lambda x: "reloaded" in x and "3 tokens" in x, mark)
        mark = len(s.lines)
        s.proc.send_signal(signal.SIGHUP)
        s.wait_line(lambda x: "reloaded" in x, mark)
    for t in tokens.values():
        assert all(t not in line for line in s.lines)  # tokens are never printed


def test_schema_published_later_prints_how_to_add_tokens(tmp_path: Path) -> None:
    """Without a schema serve makes an admin token; when a schema is published while it runs,
    it names the principals that still need a token, with the command to add one."""
    data = tmp_path / "g"
    with claimgraph.open(data, create=True, graph="platform"):
        pass
    with serving(data) as s:
        assert "admin (admin)" in s.wait_line(lambda x: x.startswith("created "))
        s.wait_line(lambda x: "no schema is published yet" in x)
        admin = json.loads((data / "tokens.json").read_text())["tokens"][0]["token"]
        schema = (ROOT / "schemas/graphs/inventory.yaml").read_text()
        schema = schema.replace("admins: [platform-admin]", "admins: [admin]")
        mark = len(s.lines)
        r = httpx.post(
            f"{s.url}/v1/commands/publish_schema",
            json={"document": schema},
            headers={"Authorization": f"Bearer {admin}"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        s.wait_line(lambda x: "schema revision 1 is in force" in x, mark)
        hint = s.wait_line(lambda x: "sre-oncall" in x, mark)
        assert "token add sre-oncall --role resolver" in hint
        # a token added for someone the schema does not name as a resolver: said on reload
        add_token(data / "tokens.json", "bob", roles=["resolver"])
        mark = len(s.lines)
        assert httpx.get(
            f"{s.url}/v1/head", headers={"Authorization": f"Bearer {admin}"}
        ).is_success
        warn = s.wait_line(lambda x: "'bob'" in x, mark)
        assert "not_resolver" in warn


def test_schema_principals_and_role_mismatches() -> None:
    """The shipped schemas' concrete principals get tokens; patterns are listed; a token whose
    role the schema does not grant (the old 'reviewer') is named with its consequence."""
    from claimgraph.core.schema import parse_schema
    from claimgraph.http.auth import Principal
    from claimgraph.http.tokens import role_mismatches, schema_principals

    inv = parse_schema((ROOT / "schemas/graphs/inventory.yaml").read_text(), "inventory.yaml")
    named, patterns = schema_principals(inv)
    assert named == [
        {"agent": "platform-admin", "roles": ["admin"]},
        {"agent": "sre-oncall", "roles": ["resolver"]},
    ]
    assert patterns == ["principals.resolvers 'human:*'"]
    pay = parse_schema((ROOT / "schemas/graphs/refunds.yaml").read_text(), "refunds.yaml")
    assert schema_principals(pay) == (
        [{"agent": "payments-admin", "roles": ["admin"]},
         {"agent": "resolver-bot", "roles": ["resolver"]}],
        ["principals.humans 'human:*'"],
    )  # fmt: skip
    old = [Principal("admin", roles=frozenset({"admin"})),
           Principal("reviewer", roles=frozenset({"resolver"})),
           Principal("human:ann", roles=frozenset({"resolver"}))]  # fmt: skip
    lines = role_mismatches(pay, old)
    assert len(lines) == 2
    assert "'admin'" in lines[0] and "not_admin" in lines[0]
    assert "'reviewer'" in lines[1] and "not_resolver" in lines[1]


def test_old_file_that_cannot_be_rewritten_is_still_served(tmp_path: Path) -> None:
    """Where the old file cannot be rewritten (here its lock is blocked: a directory stands
    where the lock file goes, as a read-only mount would refuse it), it is still read, and
    the server says so."""
    path = tmp_path / "tokens.json"
    path.write_text("# old\n" + json.dumps({"tokens": [{"agent": "ops", "token": "t-ops"}]}))
    (tmp_path / ".tokens.json.lock").mkdir()
    lines: list[str] = []
    wf = WatchedTokenFile(path, report=lines.append)
    assert wf.principal("t-ops") is not None
    assert any("could not rewrite" in line for line in lines), lines
    assert path.read_text().startswith("# old")
