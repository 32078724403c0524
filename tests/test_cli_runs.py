"""End to end through the real ``claimgraph`` command: runs list|show|replay and signing keys."""

from __future__ import annotations

import json
from pathlib import Path

import claimgraph
from tests.conftest import SCHEMA
from tests.test_cli import _run


def _graph_with_runs(path: Path) -> tuple[str, str]:
    """A graph with one finished run and one forged trace whose second read lies."""
    with claimgraph.open(path, create=True) as g:
        g.publish_schema(SCHEMA, agent="admin")
        g.assert_("calls", "service:a", "service:b", agent="inventory")
        with g.run(agent="inventory", task="reconcile") as run:
            run.neighbors("service:a")
            run.edge("calls", "service:a", "service:b")
            run.assert_("calls", "service:a", "service:c")
            run.tool("search", {"q": "a"}, ["b"])
        g.assert_("calls", "service:a", "service:z", agent="tracer")
        forged = [dict(e, run_id="run-forged") for e in g.run_events(run.run_id)]
        payload = json.loads(forged[2]["payload"])
        payload["digest"] = "f" * 64
        forged[2]["payload"] = json.dumps(payload)
        g.append_run_events(forged[:3])  # started, never ended: a live pin
        return run.run_id, "run-forged"


def test_runs_list_show_replay(tmp_path: Path) -> None:
    """list shows both runs (one live), show prints the trace, replay proves the inputs."""
    run_id, forged = _graph_with_runs(tmp_path / "g")
    d = ["--data", str(tmp_path / "g")]
    r = _run([*d, "runs", "list", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    runs = {x["run_id"]: x for x in json.loads(r.stdout)}
    assert runs[run_id]["pinned_version"] == 1 and not runs[run_id]["live"]
    assert (runs[run_id]["reads"], runs[run_id]["writes"], runs[run_id]["tools"]) == (2, 1, 1)
    assert runs[forged]["live"]
    text = _run([*d, "runs", "list"], tmp_path).stdout
    assert "LIVE" in text and "inventory/reconcile" in text
    show = _run([*d, "runs", "show", run_id], tmp_path)
    assert show.returncode == 0, show.stderr
    assert "pinned v1" in show.stdout and "read  neighbors(" in show.stdout
    assert "tool  search" in show.stdout and "write claim" in show.stdout
    ok = _run([*d, "runs", "replay", run_id], tmp_path)
    assert ok.returncode == 0 and "replay ok: 2 reads at v1" in ok.stdout, ok.stderr
    bad = _run([*d, "runs", "replay", forged], tmp_path)
    assert bad.returncode == 7
    assert "replayed differently at event 2" in bad.stderr
    missing = _run([*d, "runs", "show", "no-such-run"], tmp_path)
    assert missing.returncode == 9 and "no run 'no-such-run'" in missing.stderr


def test_keys_from_the_cli_make_the_graph_require_signatures(tmp_path: Path) -> None:
    """key generate + register, and a schema that requires signatures: unsigned commands are
    then rejected, signed ones admitted."""
    signed = SCHEMA.replace("  admins: [admin]\n", "  admins: [admin]\n  signatures: required\n")
    with claimgraph.open(tmp_path / "g", create=True) as g:
        g.publish_schema(signed, agent="admin")
    d = ["--data", str(tmp_path / "g")]
    gen = _run(["key", "generate", str(tmp_path / "admin-1.pem")], tmp_path)
    assert gen.returncode == 0, gen.stderr
    assert (tmp_path / "admin-1.pem").stat().st_mode & 0o777 == 0o600
    public = gen.stdout.split("public key: ")[1].split()[0]
    reg = _run(
        [*d, "key", "register", "admin-1", public, "--for", "admin", "-a", "admin", "--json"],
        tmp_path,
    )
    assert reg.returncode == 0 and json.loads(reg.stdout)["reason"] == "key_registered", reg.stderr
    grant = [*d, "grant", "intern", "owns", "--agent", "admin", "--json"]
    unsigned = _run(grant, tmp_path)
    assert json.loads(unsigned.stdout)["reason"] == "unsigned"
    again = _run(
        [
            *d,
            "key",
            "revoke",
            "admin-1",
            "-a",
            "admin",
            "--sign-with",
            str(tmp_path / "admin-1.pem"),
        ],
        tmp_path,
    )
    assert again.returncode == 0 and "key_revoked" in again.stdout, again.stdout + again.stderr
    after = json.loads(_run(grant, tmp_path).stdout)  # revoking the last key turns nothing off
    assert after["reason"] == "unsigned" and "no signing key is active" in after["detail"]
