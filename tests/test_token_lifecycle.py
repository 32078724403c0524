"""Static tokens with a lifecycle (issue #33, item 2): several per agent, an expiry, revocation
and a list that shows expiry and last use but never a secret. An expired or revoked token is
refused at once — on the HTTP API and on /mcp alike (both resolve callers through the token
file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

import claimgraph
from claimgraph.cli.main import app as cli
from claimgraph.http.app import create_app
from claimgraph.http.auth import token_digest
from claimgraph.http.tokens import WatchedTokenFile, add_token
from claimgraph.mcp.transports import mount
from claimgraph.service.writes import now_millis
from tests.conftest import SCHEMA

MCP_INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip


def _tokens_cli(path: Path, *args: str) -> Any:
    r = CliRunner().invoke(cli, ["token", *args, "--tokens", str(path)])
    assert r.exit_code == 0, (r.output, r.exception)
    return r.stdout


def test_tokens_expire_are_several_per_agent_and_revoked_at_once(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    reconcile = add_token(path, "inventory", tasks=["reconcile"])
    audit = add_token(path, "inventory", tasks=["audit-*"], another=True)
    expired = add_token(path, "tracer", expires_at=now_millis() - 1)  # its time has passed
    later = add_token(path, "tracer", another=True, expires_at=now_millis() + 3_600_000)
    with claimgraph.open(tmp_path / "g", create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
        tokens = WatchedTokenFile(path)
        app = create_app(g, tokens)
        mount(app)
        with TestClient(app, base_url="http://127.0.0.1:8000") as http:

            def whoami(token: str) -> Any:
                return http.get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})

            def mcp(token: str) -> int:
                h = {"Authorization": f"Bearer {token}",
                     "accept": "application/json, text/event-stream"}  # fmt: skip
                return http.post("/mcp", json=MCP_INIT, headers=h).status_code

            # one agent, two tokens, two task scopes
            assert whoami(reconcile).json()["tasks"] == ["reconcile"]
            assert whoami(audit).json()["tasks"] == ["audit-*"]
            assert whoami(later).json()["agent"] == "tracer"
            # past its expires_at: refused on every surface, nothing else learnt
            assert whoami(expired).status_code == 401
            assert mcp(expired) == 401 and mcp(later) == 200

            listed = json.loads(_tokens_cli(path, "list", "--json"))
            by_id = {r["id"]: r for r in listed}
            audit_id = "t-" + token_digest(audit)[:12]
            assert by_id["t-" + token_digest(expired)[:12]]["expired"] is True
            assert by_id["t-" + token_digest(later)[:12]]["expired"] is False
            assert {r["agent"] for r in listed} == {"inventory", "tracer"} and len(listed) == 4

            # revoked: the very next request is refused; the other token of the agent works
            said = _tokens_cli(path, "revoke", audit_id)
            assert audit_id in said
            assert whoami(audit).status_code == 401
            assert whoami(reconcile).status_code == 200

        tokens.flush_used()  # serve does at most 30 s late, and when it stops
    text = _tokens_cli(path, "list")
    rows = json.loads(_tokens_cli(path, "list", "--json"))
    used = {r["id"]: r["last_used"] for r in rows}
    assert used["t-" + token_digest(reconcile)[:12]] is not None
    assert used["t-" + token_digest(expired)[:12]] is None  # refused: never a use
    assert audit_id not in used and len(rows) == 3
    for secret in (reconcile, audit, expired, later):  # never a token, nor its digest
        assert secret not in text and token_digest(secret) not in text
    assert "(expired)" in text and "last used never" in text


def test_a_bad_expiry_or_a_missing_id_is_a_clear_error(tmp_path: Path) -> None:
    from claimgraph.errors import ConfigError
    from claimgraph.http.auth import TokenFile

    bad = '{"tokens": [{"agent": "a", "token": "x", "expires_at": "next tuesday"}]}'
    try:
        TokenFile.parse(bad, "t.json")
    except ConfigError as exc:
        assert "tokens[0]: expires_at" in str(exc)
    else:
        raise AssertionError("an expiry that is no time was accepted")
    path = tmp_path / "tokens.json"
    add_token(path, "a")
    r = CliRunner().invoke(cli, ["token", "revoke", "t-000000000000", "--tokens", str(path)])
    assert isinstance(r.exception, ConfigError) and "no token 't-000000000000'" in str(r.exception)
    r = CliRunner().invoke(cli, ["token", "add", "a", "--expires", "soon", "--tokens", str(path)])
    assert isinstance(r.exception, ConfigError) and "--expires 'soon'" in str(r.exception)
