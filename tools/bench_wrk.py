#!/usr/bin/env python3
"""HTTP reads under `wrk` (a load generator that is not Python): server CPU per request.

    .venv/bin/python tools/bench_wrk.py --out BENCHMARKS.md      # make bench
    .venv/bin/python tools/bench_wrk.py --claims 20000           # to stdout

A graph of ``--claims`` claims is built with ``claimgraph submit`` (tools/bench_submit.py's
file), then ``claimgraph serve`` runs as users run it (one uvicorn process with httptools
and uvloop, the gate's limits, /metrics and the JSON request log on) and ``wrk`` (Debian's;
one thread, 4 connections) sends, in alternating rounds of ``--seconds`` each:

* ``GET /v1/edge`` of existing edges (answered by the thin path);
* the same with ``&timeout=0`` (answered by the FastAPI route: the baseline);
* ``POST /v1/read/edges`` of 100 edges at once.

Server CPU per request is the server process's user + system time over the round
(``/proc/PID/stat``) divided by the requests ``wrk`` completed; ``wrk`` runs on the same 2
cores, so requests/s is a floor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_submit import write_claims  # noqa: E402
from sections import write_section  # noqa: E402
from workload import SCHEMA  # noqa: E402

MARKER = "<!-- wrk-benchmarks -->"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def claimgraph(*args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "claimgraph", *args], cwd=ROOT, check=True, **kw)


def wrk(args: list[str], pid: int) -> dict[str, float]:
    c0 = cpu_seconds(pid)
    out = subprocess.run(["wrk", *args], capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - c0
    m = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m is None or rps is None:
        raise SystemExit(f"cannot read wrk's output:\n{out}")
    if errors is not None:
        raise SystemExit(f"wrk saw error answers:\n{out}")
    n = int(m.group(1))
    return {"n": n, "rps": float(rps.group(1)), "cpu_us": 1e6 * cpu / max(n, 1)}


def build(work: Path, claims: int) -> tuple[Path, list[tuple[str, str]]]:
    data = work / "graph"
    file, schema = work / "claims.jsonl", work / "schema.yaml"
    write_claims(file, claims, 20261201)
    schema.write_text(SCHEMA, encoding="utf-8")
    claimgraph("--data", str(data), "init", "--graph", "bench", stdout=subprocess.DEVNULL)
    claimgraph("--data", str(data), "schema", "apply", str(schema), "--agent", "bench-admin",
               stdout=subprocess.DEVNULL)  # fmt: skip
    claimgraph("--data", str(data), "submit", str(file), stdout=subprocess.DEVNULL)
    edges = []
    with file.open() as f:
        for i, line in enumerate(f):
            if i % max(1, claims // 200) == 0:
                c = json.loads(line)
                edges.append((c["subject"], c["object"]))
    return data, edges


def serve(data: Path) -> tuple[subprocess.Popen[bytes], int, str]:
    added = claimgraph("--data", str(data), "token", "add", "wrk-reader", capture_output=True)
    token = added.stdout.decode().strip().splitlines()[-1]  # printed once; the file keeps a hash
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port", str(port),
         "--tick", "0"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise SystemExit("claimgraph serve did not come up")
    return proc, port, token


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("--claims", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    work = Path(tempfile.mkdtemp(prefix="claimgraph-bench-wrk-", dir=ROOT))
    proc = None
    try:
        data, edges = build(work, a.claims)
        proc, port, token = serve(data)
        base = f"http://127.0.0.1:{port}"
        lua = work / "requests.lua"
        paths = [f"/v1/edge?edge_type=stocks&subject={s}&object={o}" for s, o in edges]
        body = json.dumps(
            {"edges": [{"edge_type": "stocks", "subject": s, "object": o} for s, o in edges[:100]]}
        )
        lua.write_text(
            "local paths = {" + ",".join(json.dumps(x) for x in paths) + "}\n"
            "local i = 0\n"
            "local suffix = os.getenv('SUFFIX') or ''\n"
            "request = function()\n"
            "  i = i % #paths + 1\n"
            "  return wrk.format('GET', paths[i] .. suffix)\n"
            "end\n"
        )
        post = work / "post.lua"
        post.write_text(
            f"wrk.method = 'POST'\nwrk.body = {json.dumps(body)}\n"
            "wrk.headers['Content-Type'] = 'application/json'\n"
        )
        common = ["-t1", "-c4", "-H", f"Authorization: Bearer {token}"]
        kinds = {
            "GET /v1/edge (thin path)": (["-s", str(lua)], ""),
            "GET /v1/edge&timeout=0 (FastAPI route)": (["-s", str(lua)], "&timeout=0"),
            "POST /v1/read/edges, 100 edges": (["-s", str(post)], None),
        }
        res: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        os.environ["SUFFIX"] = ""
        wrk([*common, "-d2s", "-s", str(lua), base], proc.pid)  # warm-up
        for r in range(a.rounds):
            for name, (script, suffix) in kinds.items():
                os.environ["SUFFIX"] = suffix or ""
                target = base + ("/v1/read/edges" if suffix is None else "")
                m = wrk([*common, f"-d{a.seconds}s", *script, target], proc.pid)
                res[name].append(m)
                print(f"round {r + 1}: {name}: {m['rps']:,.0f}/s, {m['cpu_us']:,.0f} µs "
                      "server CPU per request", file=sys.stderr, flush=True)  # fmt: skip
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    def mmm(v: list[float]) -> str:
        return " / ".join(f"{x:,.0f}" for x in (min(v), statistics.median(v), max(v)))

    lines = [
        "## HTTP reads under wrk: server CPU per request (tools/bench_wrk.py)",
        "",
        f"Generated on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a graph of "
        f"{a.claims:,} claims; `claimgraph serve` (uvicorn with httptools and uvloop, limits "
        "on, /metrics and the JSON request log on: serve's defaults) and `wrk -t1 -c4` on the "
        "same 2 cores; "
        f"{a.rounds} alternating rounds of {a.seconds} s; {len(paths)} existing edges in "
        f"turn. Load average at the end {load}. Min / median / max:",
        "",
        "| request | requests/s | server CPU µs per request |",
        "|---|---:|---:|",
    ]
    for name, ms in res.items():
        lines.append(
            f"| {name} | {mmm([m['rps'] for m in ms])} | {mmm([m['cpu_us'] for m in ms])} |"
        )
    thin = statistics.median(m["cpu_us"] for m in res["GET /v1/edge (thin path)"])
    per_edge = statistics.median(m["cpu_us"] for m in res["POST /v1/read/edges, 100 edges"]) / 100
    lines += [
        "",
        f"Target: <= 150 µs of server CPU per edge read and >= 4,000 reads/s on one core: "
        f"the thin path's median is {thin:,.0f} µs "
        f"({'**PASS**' if thin <= 150 else '**FAIL**'}; one core's worth of it is "
        f"{1e6 / thin:,.0f} reads/s); a batch read costs {per_edge:,.0f} µs per edge.",
        "",
    ]
    text = "\n".join(lines)
    if a.out is None:
        print(text)
    else:
        write_section(a.out, MARKER, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
