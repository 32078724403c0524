"""The version commands through the real CLI: one-line errors with the documented exit codes."""

from __future__ import annotations

from pathlib import Path

from tests.test_cli import _run, workdir  # noqa: F401  (fixture)


def test_version_commands_fail_in_one_line(workdir: Path) -> None:  # noqa: F811
    """A pruned read exits 5 naming the horizon; bad gc, audit and restore options exit 2."""
    g = ["--data", "./g"]
    assert _run([*g, "init", "--graph", "platform"], workdir).returncode == 0
    schema = ["schema", "apply", "schemas/graphs/inventory.yaml", "--agent", "platform-admin"]
    assert _run([*g, *schema], workdir).returncode == 0
    for env in ("e1", "e2", "e3"):
        r = _run([*g, "assert", "deployment_target", "service:checkout", f"environment:{env}",
                  "--agent", "release-agent", "--task", "promote-release"], workdir)  # fmt: skip
        assert r.returncode == 0, r.stderr
    r = _run([*g, "gc", "--keep", "1", "--json"], workdir)
    assert r.returncode == 0 and '"horizon": 3' in r.stdout
    cases = [
        (["get", "deployment_target", "service:checkout", "--at", "1"], 5, "horizon is 3"),
        (["audit", "--at", "2"], 5, "version 2 was pruned: the horizon is 3"),
        (["gc"], 2, "exactly one of"),
        (["gc", "--keep-age", "soon"], 2, "is not an age"),
        (["gc", "--horizon", "7"], 2, "above head"),
        (["audit", "--at", "3", "--from", "3"], 2, "not both"),
        (["verify", "--from", "2", "--to", "9"], 2, "above head"),
        (["checkpoint", "restore"], 9, "no checkpoints"),
        (["pin", "add", "1"], 5, "was pruned"),
        (["pin", "remove", "nope"], 9, "no live pin"),
    ]
    for args, code, text in cases:
        r = _run([*g, *args], workdir)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], (args, r.stderr)


def test_checkpoint_of_an_empty_graph_says_so(workdir: Path) -> None:  # noqa: F811
    """A graph with no decision yet has nothing to checkpoint: exit 2 in one line, no crash."""
    assert _run(["--data", "./g", "init"], workdir).returncode == 0
    r = _run(["--data", "./g", "checkpoint", "create"], workdir)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip() == (
        "claimgraph: error: nothing to checkpoint: the graph has no decisions yet"
    )
