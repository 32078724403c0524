#!/usr/bin/env python3
"""HTTP read benchmark: ``claimgraph serve`` (uvicorn) against the in-process SDK, same run.

    .venv/bin/python tools/bench_http.py --out BENCHMARKS.md             # 50,000 commands
    .venv/bin/python tools/bench_http.py --quick --out /tmp/bench.md     # 5,000, ~30 s

1. build an embedded graph (``calls`` edges between services, one decision per claim) in
   bench-data/http;
2. in this process, through the embedded SDK (``claimgraph.open``): ``edge`` and
   ``neighbors`` at random versions, timing each call -> p50/p99 and calls/s;
3. start ``claimgraph serve`` (uvicorn) on loopback as a second process and repeat the same
   reads through the HTTP SDK (``claimgraph.connect``, one keep-alive connection) from this
   process (the load generator); then raw ``httpx`` GETs from several threads for req/s;
4. report, and the ratio of HTTP cost to in-process cost per read (mean latency).

Each measurement runs ``--rounds`` times (at least 3): calls/s are given as min / median /
max, latencies and the cost ratio are those of the median rounds.

The report replaces the section after ``<!-- http-benchmarks -->`` in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rounds import MIN_ROUNDS, rate, repeat
from sections import write_section

import claimgraph

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- http-benchmarks -->"
SCHEMA = """
principals: {admins: [admin]}
node_types: [service]
edge_types:
  - {name: calls, subject: service, object: service, writers: [{agent: tracer}],
     cardinality: many-to-many, conflict_policy: last-write-wins-with-timestamp}
"""


def say(msg: str) -> None:
    print(f"[bench_http] {msg}", flush=True)


def build(path: Path, commands: int, services: int, seed: int) -> list[tuple[str, str]]:
    """Claims between random services; returns the edges asserted."""
    rnd = random.Random(seed)
    edges: list[tuple[str, str]] = []
    with claimgraph.open(path, create=True, graph="bench") as g:
        g.publish_schema(SCHEMA, agent="admin")
        batch: list[Any] = []
        for i in range(commands):
            a, b = rnd.randrange(services), rnd.randrange(services)
            edges.append((f"s{a}", f"s{b}"))
            batch.append(
                {
                    "type": "claim",
                    "command_id": f"c{i}",
                    "graph": "bench",
                    "agent": "tracer",
                    "task": "",
                    "run_id": None,
                    "edge_type": "calls",
                    "subject_type": "service",
                    "subject_id": f"s{a}",
                    "object_type": "service",
                    "object_id": f"s{b}",
                    "polarity": "assert" if rnd.random() < 0.9 else "deny",
                    "confidence": 1.0,
                    "evidence": [],
                    "reasoning": "",
                    "asserted_at": 1_700_000_000_000 + i,
                    "based_on_version": None,
                    "properties": {},
                }
            )
            if len(batch) == 2000:
                g.submit(batch)
                batch = []
        if batch:
            g.submit(batch)
    return edges


Read = Callable[[Any, random.Random], Any]


def reads(edges: list[tuple[str, str]], head: int, services: int) -> dict[str, Read]:
    def edge(g: Any, rnd: random.Random) -> Any:
        a, b = edges[rnd.randrange(len(edges))]
        return g.edge("calls", ("service", a), ("service", b), at=rnd.randint(0, head))

    def neighbors(g: Any, rnd: random.Random) -> Any:
        s = f"s{rnd.randrange(services)}"
        return g.neighbors(("service", s), edge_type="calls", at=rnd.randint(0, head))

    return {"edge": edge, "neighbors": neighbors}


def timed(g: Any, fn: Read, n: int, seed: int) -> dict[str, float]:
    rnd = random.Random(seed)
    for _ in range(min(200, n)):  # warm caches and connections
        fn(g, rnd)
    rnd = random.Random(seed)
    lat: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        fn(g, rnd)
        lat.append(time.perf_counter() - s)
    wall = time.perf_counter() - t0
    lat.sort()
    return {
        "n": n,
        "per_s": n / wall,
        "mean_us": statistics.fmean(lat) * 1e6,
        "p50_us": lat[len(lat) // 2] * 1e6,
        "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_load(
    url: str, token: str, edges: list[tuple[str, str]], head: int, threads: int, n: int
) -> dict[str, float]:
    """Raw httpx GETs of /v1/edge at random versions from several threads: requests/s."""
    done: list[list[float]] = []

    def worker(k: int) -> None:
        rnd = random.Random(k)
        lat: list[float] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            for _ in range(n // threads):
                a, b = edges[rnd.randrange(len(edges))]
                params = {
                    "edge_type": "calls",
                    "subject": f"service:{a}",
                    "object": f"service:{b}",
                    "at": rnd.randint(0, head),
                }
                s = time.perf_counter()
                r = c.get("/v1/edge", params=params)
                lat.append(time.perf_counter() - s)
                assert r.status_code == 200, r.text
        done.append(lat)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    lat = sorted(x for part in done for x in part)
    return {
        "n": len(lat),
        "threads": threads,
        "per_s": len(lat) / wall,
        "p50_us": lat[len(lat) // 2] * 1e6,
        "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="small sizes (~30 s)")
    ap.add_argument("--commands", type=int, default=None)
    ap.add_argument("--reads", type=int, default=None)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "http")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (>= 3): min / median / max")
    args = ap.parse_args()
    if args.rounds < MIN_ROUNDS:
        ap.error(f"--rounds must be at least {MIN_ROUNDS} (min / median / max)")
    commands = args.commands or (5_000 if args.quick else 50_000)
    n = args.reads or (2_000 if args.quick else 10_000)
    services = max(50, commands // 10)
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    data = args.dir / "g"
    say(f"building a graph of {commands:,} claims over {services:,} services")
    t0 = time.perf_counter()
    edges = build(data, commands, services, seed=7)
    say(f"built in {time.perf_counter() - t0:.1f}s")

    results: dict[str, dict[str, Any]] = {}
    with claimgraph.open(data) as g:
        head = g.head()
        ops = reads(edges, head, services)
        for name, fn in ops.items():
            results[f"inproc_{name}"] = repeat(args.rounds, lambda f=fn: timed(g, f, n, seed=11))
            say(f"in-process {name}: {rate(results[f'inproc_{name}'])}/s")

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # serve logs a line per request: to a file, never a pipe nobody reads (a full pipe blocks
    # the server, and the client times out)
    server_log = args.dir / "serve.log"
    with server_log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", "--data", str(data), "serve", "--port",
             str(port), "--tick", "0"],
            stdout=log_file, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not start: {server_log.read_text()[-2000:]}")
            time.sleep(0.1)
        doc = json.loads((data / "tokens.json").read_text())  # plain JSON
        token = next(e["token"] for e in doc["tokens"] if e["agent"] == "admin")
        with claimgraph.connect(url, token=token) as c:
            for name, fn in ops.items():
                results[f"http_{name}"] = repeat(args.rounds, lambda f=fn: timed(c, f, n, seed=11))
                say(f"HTTP {name}: {rate(results[f'http_{name}'])}/s")
        results["raw_edge"] = repeat(
            args.rounds, lambda: raw_load(url, token, edges, head, args.threads, n)
        )
        say(f"raw httpx, {args.threads} threads: {rate(results['raw_edge'])}/s")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    shutil.rmtree(args.dir, ignore_errors=True)

    lines = [
        "## claimgraph benchmarks: HTTP API",
        "",
        f"`make bench` runs `tools/bench_http.py` (this run: {commands:,} claims, head "
        f"v{head:,}, {n:,} reads per measurement, random versions in [0, head], "
        f"{args.rounds} rounds of each: calls/s as min / median / max, latencies and the "
        "cost ratio from the median rounds). "
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; server `claimgraph serve` (uvicorn, one process), load "
        "generator in a second process (this script) on loopback. Shared machine: treat "
        "absolute numbers as indicative, ratios as the finding.",
        "",
        "| read | in process: calls/s | p50 µs | p99 µs | HTTP SDK: calls/s | p50 µs | p99 µs "
        "| HTTP / in-process cost |",  # calls/s: min / median / max
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("edge", "neighbors"):
        a, b = results[f"inproc_{name}"], results[f"http_{name}"]
        lines.append(
            f"| {name} | {rate(a)} | {a['p50_us']:,.0f} | {a['p99_us']:,.0f} "
            f"| {rate(b)} | {b['p50_us']:,.0f} | {b['p99_us']:,.0f} "
            f"| {b['mean_us'] / a['mean_us']:,.1f}× |"
        )
    r = results["raw_edge"]
    lines += [
        "",
        f"Raw `httpx` GET /v1/edge from {r['threads']} threads (keep-alive, one connection "
        f"each): {rate(r)} requests/s (min / median / max); the median "
        f"round's p50 {r['p50_us']:,.0f} µs, p99 {r['p99_us']:,.0f} µs.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        write_section(args.out, MARKER, report)
        say(f"wrote {args.out}")


if __name__ == "__main__":
    main()
