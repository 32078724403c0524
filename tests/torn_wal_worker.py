"""Child process for the torn-log test: a multi-MB batch meets a full tmpfs part-way.

Runs inside a private mount namespace on a small tmpfs (``tests/test_disk_full.py``). For each
amount of free space in ``tests/data/disk_full.json`` ("torn_wal"), it writes a graph, leaves
only that much space, and then:

* ``cli``: ``claimgraph submit`` of a multi-MB JSON Lines file, on the embedded runtime;
* ``serve``: one ``POST /v1/commands`` of a multi-MB batch to a real ``claimgraph serve``;

then frees the space and reports what each following step answered (``head``, the next
write, ``verify``, ``audit``). Prints one JSON object with every case's answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import claimgraph
from tests.conftest import ROOT, SCHEMA
from tests.disk_full_worker import _free
from tests.http_fixtures import TOKENS
from tests.test_review_page import _free_port

DATA = json.loads((ROOT / "tests" / "data" / "disk_full.json").read_text())["torn_wal"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _claim(i: int) -> dict[str, Any]:
    return {
        "type": "assert",
        "command_id": f"torn-{i}",
        "edge_type": "depends_on",
        "subject": f"service:a{i}",
        "object": f"service:b{i}",
        "agent": "inventory",
        "reasoning": "r" * DATA["reasoning"],
    }


def _leave(mnt: Path, ballast: Path, free: int) -> int:
    """Take all but ``free`` bytes of the tmpfs with a ballast file; return what is free."""
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while (left := _free(mnt) - free) > 0:
            os.write(fd, b"\0" * min(left, 1 << 20))
    finally:
        os.close(fd)
    return _free(mnt)


def _cli(data: Path, *args: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(data), *args],
        env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return {"rc": r.returncode, "lines": len(r.stdout.splitlines()), "stderr": r.stderr[-2000:]}


def _after(data: Path, work: Path) -> dict[str, Any]:
    """What the graph answers once the space is back (each step a new process)."""
    small = work / "small.jsonl"
    small.write_text(json.dumps({**_claim(10**6), "reasoning": ""}) + "\n")
    return {
        "head": _cli(data, "head"),
        "next": _cli(data, "submit", str(small)),
        "verify": _cli(data, "verify"),
        "audit": _cli(data, "audit"),
    }


def cli_case(mnt: Path, work: Path, free: int) -> dict[str, Any]:
    data = mnt / f"cli-{free}"
    with claimgraph.open(data, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
    big = work / "big.jsonl"
    with big.open("w") as fh:
        for i in range(DATA["lines"]):
            fh.write(json.dumps(_claim(i)) + "\n")
    ballast = mnt / "ballast"
    out: dict[str, Any] = {"free": _leave(mnt, ballast, free)}
    out["submit"] = _cli(data, "submit", "--batch", str(DATA["lines"]), str(big))
    ballast.unlink()
    out.update(_after(data, work))
    return out


def serve_case(mnt: Path, work: Path, free: int, tokens: Path) -> dict[str, Any]:
    data = mnt / f"serve-{free}"
    with claimgraph.open(data, create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port",
         str(port), "--tokens", str(tokens), "--tick", "0", "--max-body", str(16 << 20),
         "--max-batch", str(DATA["lines"])],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKENS['inventory']}"}
    deadline = time.monotonic() + 60
    while True:  # until the server answers (an observed event, bounded)
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.05)
    items = [
        {k: v for k, v in {**_claim(i), "type": "claim"}.items() if k != "agent"}
        for i in range(DATA["lines"])
    ]
    ballast = mnt / "ballast"
    out: dict[str, Any] = {"free": _leave(mnt, ballast, free)}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        r = client.post("/v1/commands", json={"commands": items})
        out["batch"] = {"status": r.status_code, "reason": r.json().get("reason")}
        ballast.unlink()
        one = {k: v for k, v in items[0].items() if k != "type"}
        r = client.post("/v1/commands/claim", json={**one, "command_id": "after"})
        out["http_next"] = {"status": r.status_code, "kind": r.json()["decision"]["kind"]}
    server.send_signal(signal.SIGINT)
    _, err = server.communicate(timeout=60)
    out["serve_rc"] = server.returncode
    out["serve_stderr"] = err[-2000:]
    out.update(_after(data, work))
    return out


def main(mnt: Path, work: Path, tokens: Path) -> None:
    out = {
        "cli": {str(f): cli_case(mnt, work, f) for f in DATA["free_bytes"]},
        "serve": {str(f): serve_case(mnt, work, f, tokens) for f in DATA["free_bytes"]},
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
