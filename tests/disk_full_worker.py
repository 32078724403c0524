"""Child process for the disk-full test: runs inside a private mount namespace on a small tmpfs.

Creates two graphs on the tmpfs (``g``, served by a real ``claimgraph serve`` child, and
``g2``, for the CLI), prints ``{"ready": port}``, then answers one JSON request per stdin line:
``fill`` (a ballast file takes every free byte), ``free`` (it is deleted), ``cli`` (run the CLI
on ``g2``) and ``stop`` (stop the server, then report every decision in ``g``'s log and run
verify and audit). The test drives the server over HTTP itself.
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
from claimgraph.service.audit import audit, verify
from tests.conftest import ROOT, SCHEMA
from tests.test_review_page import _free_port


def _free(mnt: Path) -> int:
    st = os.statvfs(mnt)
    return st.f_bavail * st.f_frsize


def _fill(ballast: Path) -> None:
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != 28:  # ENOSPC: the next, smaller chunk
                    raise
    finally:
        os.close(fd)


def main(mnt: Path, tokens: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("g", "g2"):
        with claimgraph.open(mnt / name, create=True, graph="test") as g:
            g.publish_schema(SCHEMA, agent="admin")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(mnt / "g"), "serve", "--port",
         str(port), "--tokens", str(tokens), "--tick", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:  # wait for the server to answer (an observed event, bounded)
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.05)
    print(json.dumps({"ready": port}), flush=True)
    ballast = mnt / "ballast"
    for line in sys.stdin:
        req = json.loads(line)
        out: dict[str, Any] = {}
        if req["op"] == "fill":
            _fill(ballast)
            out["free"] = _free(mnt)
        elif req["op"] == "free":
            ballast.unlink()
            out["free"] = _free(mnt)
        elif req["op"] == "cli":
            r = subprocess.run(
                [sys.executable, "-m", "claimgraph", "--data", str(mnt / "g2"), *req["args"]],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            out = {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr}
        elif req["op"] == "stop":
            server.send_signal(signal.SIGINT)
            _, err = server.communicate(timeout=60)
            with claimgraph.open(mnt / "g") as g:
                out = {
                    "serve_rc": server.returncode,
                    "serve_stderr": err[-4000:],
                    "decisions": [
                        [v, d["command_id"], d["kind"]] for v, d in g.decisions(0, 100_000)
                    ],
                    "head": g.head(),
                    "verify": verify(g).as_dict(),
                    "audit": audit(g).as_dict()["ok"],
                }
            print(json.dumps(out), flush=True)
            return
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
