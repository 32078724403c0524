"""End to end through the real ``claimgraph`` command: the docs' synopsis, submit, errors, demo."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimgraph.demo.inventory import run_demo
from tests.conftest import ROOT
from tests.docs_text import block, blocks

CLI = [sys.executable, "-m", "claimgraph"]


def _run(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        CLI + args, cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory with the repository's schemas/ beside it, as the docs assume."""
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    return tmp_path


def test_readme_cli_synopsis_runs(workdir: Path) -> None:
    """Every claimgraph command of the docs' blocks on ./g exits 0, in reading order."""
    script = "\n".join(b for b in blocks("bash") if "claimgraph --data ./g " in b)
    script = script.replace("\\\n", " ")
    ran = 0
    for line in script.splitlines():
        line = line.split("  #")[0].strip()
        if line.startswith("cat > cmds.jsonl"):
            body = script.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0]
            (workdir / "cmds.jsonl").write_text(body + "\n")
            continue
        if not line.startswith("claimgraph"):
            continue
        for part in line.split("&&"):
            args = part.split()[1:]
            r = _run(args, workdir)
            assert r.returncode == 0, f"{part}\n{r.stdout}\n{r.stderr}"
            ran += 1
    assert ran >= 10
    out = _run(
        ["--data", "./g", "get", "depends_on", "service:checkout", "service:billing", "--json"],
        workdir,
    )
    assert json.loads(out.stdout)["state"] == "present"


def test_readme_python_synopsis_runs(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docs' Python example runs and prints what its comments say."""
    monkeypatch.chdir(workdir)
    code = block("python", 'with claimgraph.open("./g2"')
    exec(compile(code, "docs/tutorials/first-graph.md", "exec"), {})
    printed = capsys.readouterr().out.split("\n")
    assert printed[0] == "accepted new 1"
    assert printed[1] == "present"
    assert printed[2] == "absent"


def test_submit_gives_one_decision_per_line_even_for_garbage(workdir: Path) -> None:
    """Malformed lines become recorded rejections; every non-blank line gets one decision."""
    _run(["--data", "g", "init"], workdir)
    r = _run(
        [
            "--data",
            "g",
            "schema",
            "apply",
            "schemas/graphs/inventory.yaml",
            "--agent",
            "platform-admin",
        ],
        workdir,
    )
    assert r.returncode == 0, r.stderr
    lines = [
        json.dumps(
            {
                "type": "assert",
                "edge_type": "depends_on",
                "subject": "service:a",
                "object": "service:b",
                "agent": "inventory-agent",
            }
        ),
        "{not json",
        json.dumps(
            {
                "type": "assert",
                "edge_type": "depends_on",
                "subject": "nocolon",
                "object": "service:b",
                "agent": "inventory-agent",
            }
        ),
        json.dumps([1, 2]),
        "",
        json.dumps(
            {
                "type": "deny",
                "edge_type": "depends_on",
                "subject": "service:a",
                "object": "service:b",
                "agent": "inventory-agent",
                "command_id": "x" * 999,
            }
        ),
        json.dumps({"type": "retract", "claim_id": "nope", "agent": "inventory-agent"}),
    ]
    r = _run(["--data", "g", "submit", "-"], workdir, stdin="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(d["kind"], d["reason"]) for d in out] == [
        ("accepted", "new"),
        ("rejected", "malformed"),
        ("rejected", "malformed"),
        ("rejected", "malformed"),
        ("rejected", "malformed"),
        ("rejected", "unknown_claim"),
    ]
    assert "line 2" in out[1]["detail"] and "not JSON" in out[1]["detail"]
    assert "type:id" in out[2]["detail"]
    assert [d["version"] for d in out] == [1, 2, 3, 4, 5, 6]
    assert "5 command(s) rejected" in r.stderr
    strict = _run(["--data", "g", "submit", "-", "--strict"], workdir, stdin="oops\n")
    assert strict.returncode == 1
    # nothing stored was lost: the accepted edge is still there, and the log is whole
    got = _run(["--data", "g", "get", "depends_on", "service:a", "service:b", "--json"], workdir)
    assert json.loads(got.stdout)["state"] == "present"
    assert _run(["--data", "g", "verify"], workdir).returncode == 0


@pytest.mark.parametrize(
    ("args", "code", "phrase"),
    [
        (["--data", "missing", "head"], 2, "not a claimgraph data directory"),
        (["--data", "g", "schema", "apply", "nope.yaml"], 3, "cannot read"),
        (
            ["--data", "g", "get", "depends_on", "service:a", "service:b", "--at", "99"],
            5,
            "version 99 is not available",
        ),
        (["--data", "g", "get", "depends_on", "nocolon", "service:b"], 4, "type:id"),
        (["--data", "g", "resolve", "cf:x", "--agent", "sre-oncall"], 4, "--winner"),
        (["--data", "g", "claim", "nope"], 9, "no claim 'nope' (the graph has no decisions yet)"),
        (["--data", "g", "escalations", "cf:nope"], 9, "no conflict 'cf:nope'"),
        (["--data", "g", "schema", "show"], 9, "no schema has been published"),
    ],
)
def test_errors_are_one_clear_line(workdir: Path, args: list[str], code: int, phrase: str) -> None:
    """Errors exit non-zero with one line on stderr and no traceback."""
    _run(["--data", "g", "init"], workdir)
    r = _run(args, workdir)
    assert r.returncode == code, r.stderr
    assert phrase in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_schema_errors_list_every_problem(workdir: Path) -> None:
    """A bad schema file exits 3 and lists every problem with its path."""
    (workdir / "bad.yaml").write_text(
        "principals: {admins: [a]}\nnode_types: [s]\nedge_types:\n"
        "  - {name: e, subject: s, object: t, writers: [{agent: x}], cardinality: few,"
        " conflict_policy: quarantine}\n"
    )
    r = _run(["schema", "check", "bad.yaml"], workdir)
    assert r.returncode == 3
    assert "edge_types[0].object" in r.stderr and "edge_types[0].cardinality" in r.stderr


def test_locked_store_reads_attach_and_writes_say_why(workdir: Path) -> None:
    """A process holding the directory without taking writes: reads answer, a write is a
    clear storage error (exit 8) naming why, after a bounded wait."""
    import claimgraph

    _run(["--data", "g", "init"], workdir)
    with claimgraph.open(workdir / "g"):
        r = _run(["--data", "g", "head"], workdir)
        assert (r.returncode, r.stdout) == (0, "default: head v-1\n")
        os.environ["CLAIMGRAPH_WRITER_WAIT"] = "0.2"
        try:
            w = _run(["--data", "g", "grant", "x", "*", "--agent", "admin"], workdir)
        finally:
            del os.environ["CLAIMGRAPH_WRITER_WAIT"]
    assert w.returncode == 8
    assert "is held by another process that accepts no writes" in w.stderr
    assert "announced no socket" in w.stderr


def test_init_claim_and_resolve_print_what_a_person_reads(workdir: Path) -> None:
    """`init` says an empty graph is empty (no "version -1"); `claim` prints ISO times and
    vN versions, not epoch milliseconds or None; `resolve` records the agent that decided as
    its resolver unless told otherwise (no "human:" for an agent)."""
    d = ["--data", "g"]
    init = _run([*d, "init"], workdir)
    assert init.returncode == 0, init.stderr
    assert init.stdout.strip() == "graph 'default' in g: empty, no decisions yet (the first is v0)"
    schema = ["schema", "apply", "schemas/graphs/inventory.yaml", "--agent", "platform-admin"]
    assert _run([*d, *schema], workdir).returncode == 0
    inv = ["--agent", "inventory-agent", "--task", "reconcile-service-topology"]
    own = ["service_owns_database", "service:checkout", "database:orders-db"]
    at = ["--asserted-at", "2026-11-29T10:00:00Z", "--evidence", "cmdb#1", "--evidence", "x"]
    assert _run([*d, "assert", *own, *inv, *at, "--id", "own-1"], workdir).returncode == 0
    claim = _run([*d, "claim", "own-1"], workdir)
    assert claim.returncode == 0, claim.stderr
    fields = dict(line.strip().split(": ", 1) for line in claim.stdout.splitlines() if ": " in line)
    assert fields["asserted_at"] == "2026-11-29T10:00:00.000Z", claim.stdout
    assert (fields["since"], fields["run_id"], fields["evidence"]) == ("v1", "-", "cmdb#1, x")
    assert "None" not in claim.stdout and not re.search(r"\b\d{13}\b", claim.stdout)
    assert _run([*d, "init"], workdir).stdout.strip() == "graph 'default' in g: head v1"
    dba = ["--agent", "dba-agent", "--task", "audit-q4", "--id", "own-2"]
    assert _run([*d, "assert", "service_owns_database", "service:payments", "database:orders-db",
                 *dba], workdir).returncode == 0  # fmt: skip
    r = _run([*d, "resolve", "cf:own-2", "--winner", "own-1", "--agent", "sre-oncall"], workdir)
    assert r.returncode == 0, r.stderr
    assert "— sre-oncall: own-1 wins." in r.stdout and "human" not in r.stdout


def test_reads_print_json(workdir: Path) -> None:
    """--json on reads prints parseable JSON with versions."""
    r = run_demo(workdir / "demo", say=lambda s: None)
    assert r.path is not None
    d = str(r.path)
    for args in (
        ["head"],
        ["neighbors", "service:checkout"],
        ["quarantine", "--all"],
        ["history", "service_owns_database", "service:checkout", "database:orders-db"],
        ["get", "deployment_target", "service:checkout"],
        ["schema", "show"],
        ["claim", r.receipts["owns"].command_id],
    ):
        out = _run(["--data", d, *args, "--json"], workdir)
        assert out.returncode == 0, (args, out.stderr)
        json.loads(out.stdout)
    log = _run(["--data", d, "log", "--from", "3", "--limit", "2", "--json"], workdir)
    assert [json.loads(x)["version"] for x in log.stdout.splitlines()] == [3, 4]


def test_demo_tells_the_story(tmp_path: Path) -> None:
    """The demo's key outcomes: rejection, LWW with a late loser, quarantine, resolution."""
    said: list[str] = []
    out = run_demo(tmp_path / "demo", say=said.append)
    rec = out.receipts
    assert rec["unauthorised"].reason == "unauthorized"
    assert rec["prod"].reason == "supersedes"
    assert (rec["late"].kind, rec["late"].reason) == ("conflicted", "older_than_current")
    assert rec["dispute"].kind == "quarantined"
    assert out.reads["during_conflict"] == "unknown"
    assert rec["resolve"].kind == "resolved"
    assert out.reads["after_resolve"] == "present"
    assert rec["retract"].kind == "retired"
    rows = out.reads["table"]["rows"]
    assert rows["deployment_target(checkout → staging)"] == ["present", "absent", "absent"]
    assert rows["service_owns_database(checkout → orders-db)"] == ["present", "unknown", "present"]
    assert rows["depends_on(checkout → legacy-auth)"] == ["present", "present", "absent"]
    assert out.reads["checkout_target"] == ["prod"]
    assert out.reads["verified"] is True
    text = "\n".join(said)
    assert "[REJECTED] unauthorized" in text and "[QUARANTINED]" in text
    # running it again recreates the demo graph instead of refusing
    run_demo(tmp_path / "demo", say=lambda s: None)


def test_demo_refuses_to_overwrite_other_data(tmp_path: Path) -> None:
    """The demo never deletes a directory that is not an earlier demo graph."""
    target = tmp_path / "precious"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    from claimgraph.errors import ConfigError

    with pytest.raises(ConfigError):
        run_demo(target, say=lambda s: None)
    assert (target / "notes.txt").exists()
