"""``claimgraph serve`` as a user runs it: a real process, real HTTP, a ticker, private tokens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

import claimgraph
from tests.conftest import ROOT, SCHEMA
from tests.test_review_page import _free_port


def test_serve_prints_where_things_are_and_serves_the_sdk(tmp_path: Path) -> None:
    """serve creates a 600 token file, prints URL and its path (not tokens), its duties (a
    ticker that ticks only when a deadline is due: tests/test_ticker.py), and serves."""
    data = tmp_path / "g"
    with claimgraph.open(data, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port", str(port),
         "--tick", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.1)
        token_path = data / "tokens.json"
        assert token_path.stat().st_mode & 0o777 == 0o600
        mcp = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert mcp.status_code == 401  # MCP is mounted, behind the same tokens
        doc = json.loads(token_path.read_text())  # plain JSON, as its name says
        tokens = {e["agent"]: e["token"] for e in doc["tokens"]}
        with claimgraph.connect(url, token=tokens["admin"]) as c:
            h0 = c.head()
            r = c.grant("inventory", "owns", agent="admin")
            assert r.kind == "accepted"
            assert c.wait(r, 5).version == r.version
            assert h0 < r.version
        assert httpx.get(f"{url}/review").text.startswith("<!doctype html>")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert f"review page  {url}/review" in out
    assert f"MCP          {url}/mcp" in out
    assert f"tokens       {token_path}" in out
    assert "duties       ticks when a deadline is due (looks every 0.2s); resolvers on" in out
    for t in tokens.values():
        assert t not in out  # tokens are never printed


def test_readme_sdk_synopsis_runs_over_http(tmp_path: Path) -> None:
    """The docs' SDK example (connect, snapshot, run, wait, replay) runs against the app."""
    from claimgraph.http.app import create_app
    from claimgraph.http.auth import Principal, TokenFile, token_digest
    from tests.docs_text import blocks

    (code,) = blocks("py")
    code = code.replace(
        'claimgraph.connect("http://127.0.0.1:8080", token="release-token-change-me")',
        'claimgraph.connect("http://x", token="release-token", app=APP)',
    )
    tokens = TokenFile({token_digest("release-token"): Principal("release-agent")})
    with claimgraph.open(tmp_path / "g", create=True, graph="platform") as g:
        inventory = (ROOT / "schemas/graphs/inventory.yaml").read_text()
        g.publish_schema(inventory, agent="platform-admin")
        out: list[str] = []
        env = {"APP": create_app(g, tokens), "print": lambda *a: out.append(" ".join(map(str, a)))}
        exec(compile(code, "docs/tutorials/agents.md", "exec"), env)
        # the claim landed at head; replay: same inputs; the batch read at its version
        assert out == [f"{g.head()} True", "['present', 'absent']"]
        (summary,) = g.runs()
        assert (summary.agent, summary.reads, summary.tools, summary.writes) == (
            "release-agent",
            1,
            1,
            1,
        )
        assert g.edge("deployment_target", "service:checkout", "environment:prod").state == (
            "present"
        )
