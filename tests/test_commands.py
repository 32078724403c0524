"""The command catalogue is the one declaration: every transport is complete against it.

JSON Lines (``claimgraph submit``), the HTTP routes and bodies, the SDK writers (the graph
port) and the Avro records all carry exactly the catalogue's client commands; the records
only the system writes are refused from every client transport with a clear reason.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pytest

import claimgraph
from claimgraph.core.commands import CLIENT_COMMANDS, COMMANDS, ENVELOPE, SYSTEM_COMMANDS
from claimgraph.core.wire import schema_dir
from claimgraph.errors import AuthError, InputError
from claimgraph.http.app import openapi_document
from claimgraph.http.bodies import BODIES
from claimgraph.service.inputs import parse_command
from claimgraph.service.port import GraphAPI
from claimgraph.service.signers import Signer
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS

CLIENT_NAMES = [n for spec in CLIENT_COMMANDS for n in spec.client_names]


def _avsc(record: str) -> dict[str, Any]:
    """The newest version of a record's Avro schema (flat or per-version layout)."""
    flat = schema_dir() / f"{record}.avsc"
    if flat.exists():
        return dict(json.loads(flat.read_text()))
    newest = sorted((schema_dir() / record).glob("v*.avsc"), key=lambda p: int(p.stem[1:]))[-1]
    return dict(json.loads(newest.read_text()))


@pytest.mark.parametrize("spec", COMMANDS.values(), ids=list(COMMANDS))
def test_each_command_type_is_an_avro_record_with_the_catalogue_fields(spec: Any) -> None:
    """The record a command is written as has the envelope and exactly the declared fields."""
    names = [f["name"] for f in _avsc(spec.type)["fields"]]
    want = list(spec.fields) if spec.type == "signed" else [*ENVELOPE, *spec.fields]
    assert names == want
    fastavro.parse_schema(_avsc(spec.type))


def test_http_routes_and_bodies_are_the_client_commands() -> None:
    """One POST route and one body model per client command; none for system records."""
    paths = {p for p in openapi_document()["paths"] if p.startswith("/v1/commands/")}
    assert paths == {f"/v1/commands/{spec.type}" for spec in CLIENT_COMMANDS}
    assert set(BODIES) == {spec.type for spec in CLIENT_COMMANDS}


def test_the_graph_port_has_a_writer_per_client_command_and_no_tick() -> None:
    """The SDK writers are the catalogue's client names (``assert`` is ``assert_``)."""
    members = dict(inspect.getmembers(GraphAPI))
    for name in CLIENT_NAMES:
        assert (name + "_" if name == "assert" else name) in members, name
    assert "tick" not in members
    assert not hasattr(claimgraph.connect, "tick")


@pytest.mark.parametrize("spec", SYSTEM_COMMANDS, ids=[s.type for s in SYSTEM_COMMANDS])
def test_json_lines_refuse_system_records(spec: Any) -> None:
    """A JSON line naming a system record type is refused, saying who writes it."""
    with pytest.raises(InputError, match="never by a client"):
        parse_command({"type": spec.type, "agent": "a"}, "g")


def test_http_refuses_system_records_and_records_the_refusal(tmp_path: Path) -> None:
    """POST /v1/commands/tick is refused (403 system_only) and the refusal is in the log."""
    from claimgraph.http.app import create_app
    from tests.http_fixtures import token_file

    with claimgraph.open(tmp_path / "g", create=True, graph="t") as g:
        g.publish_schema(SCHEMA, agent="admin")
        app = create_app(g, token_file())
        with claimgraph.connect("http://t", token=TOKENS["admin"], app=app) as c:
            for ctype in ("tick", "signed", "refused", "invalid_input"):
                resp = c._request("POST", f"/v1/commands/{ctype}", json={})
                assert resp.status_code == 403, resp.text
                body = resp.json()
                assert body["reason"] == "system_only" and "never by a client" in body["detail"]
                d = g.decisions(body["version"], 1)[0][1]
                assert (d["command_type"], d["reason"]) == ("refused", "system_only")
            assert c._request("POST", "/v1/commands/nope", json={}).status_code == 404
            with pytest.raises(AuthError):
                c.submit([{"type": "tick", "command_id": "t", "graph": "t", "agent": "admin"}])  # type: ignore[list-item]


def _line(name: str, **fields: Any) -> str:
    return json.dumps({"type": name, **fields})


def test_every_client_command_round_trips_through_json_lines(tmp_path: Path) -> None:
    """`claimgraph submit` decides one line of each client command as that command."""
    key = Signer.generate("k1").public_bytes.hex()
    lines = [
        _line("publish_schema", agent="admin", document=SCHEMA, command_id="c-schema"),
        _line("assert", agent="inventory", edge_type="depends_on", subject="service:a",
              object="service:b", command_id="c-a"),
        _line("deny", agent="tracer", edge_type="depends_on", subject="service:a",
              object="service:b", command_id="c-d"),
        _line("escalate", agent="reviewer", conflict_id="cf:c-d", reason="a person decides"),
        _line("read_blocked", agent="inventory", conflict_id="cf:c-d", run_id="run-1",
              pinned_version=2),
        _line("resolve", agent="reviewer", conflict_id="cf:c-d", winner="c-a"),
        _line("grant", agent="admin", grantee_agent="intern", edge_type="owns", command_id="g1"),
        _line("revoke", agent="admin", grant_id="g1"),
        _line("retract", agent="inventory", claim_id="c-a"),
        _line("erase", agent="admin", claim_id="c-a", reason="privacy"),
        _line("upgrade_rules", agent="admin", to=2),
        _line("tick", agent="admin"),
        _line("register_key", agent="admin", key_id="k1", key_agent="inventory", public_key=key),
        _line("revoke_key", agent="admin", key_id="k1"),
    ]  # fmt: skip
    (tmp_path / "cmds.jsonl").write_text("\n".join(lines) + "\n\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "claimgraph", "--data", str(tmp_path / "g")]
    subprocess.run([*cli, "init", "--graph", "t"], check=True, env=env, capture_output=True)
    r = subprocess.run(
        [*cli, "submit", str(tmp_path / "cmds.jsonl")], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(out) == len(lines)  # one decision per non-blank line
    got = [(d["command_type"], d["kind"], d["reason"]) for d in out]
    assert got == [
        ("publish_schema", "accepted", "schema_published"),
        ("claim", "accepted", "new"),
        ("claim", "quarantined", "polarity_conflict"),
        ("escalate", "accepted", "escalated"),
        ("read_blocked", "accepted", "read_blocked"),
        ("resolve", "resolved", "winner"),
        ("grant", "accepted", "granted"),
        ("revoke", "accepted", "revoked"),
        ("retract", "retired", "retracted"),
        ("erase", "accepted", "erased"),
        ("upgrade_rules", "rejected", "invalid_field"),  # a new graph is at the newest already
        ("invalid_input", "rejected", "malformed"),  # tick: written by the ticker only
        ("register_key", "accepted", "key_registered"),
        ("revoke_key", "accepted", "key_revoked"),
    ]
    assert out[-2]["key"]["public_key"] == key  # bytes show as hex, as over HTTP
    assert "ticker" in out[-3]["detail"]
    types = {spec.type for spec in CLIENT_COMMANDS}
    assert types <= {c for c, _, _ in got}
