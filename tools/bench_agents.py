#!/usr/bin/env python3
"""Agent-facing benchmarks: MCP tool-call overhead, async HTTP reads, paths and reach.

    .venv/bin/python tools/bench_agents.py --out BENCHMARKS.md      # 20,000 claims, ~2 min
    .venv/bin/python tools/bench_agents.py --commands 1000000 ...   # the big bench graph

1. build an embedded graph (``calls`` edges between random services) in bench-data/agents;
2. **MCP over stdio** (``claimgraph mcp --agent``, the embedded graph in the MCP process)
   against the SDK call it wraps (``run.edge`` of an in-process run), same reads;
3. serve the graph (``claimgraph serve``: the API and ``/mcp``) and compare **MCP over
   streamable HTTP** (``read_edge``) with the HTTP SDK's ``run.edge``, same reads;
4. **async HTTP** (``claimgraph.aconnect``) reads/s at concurrency 1, 16 and 64 against the
   sync HTTP SDK with as many threads (one client each);
5. **paths** and **reach** at 3 hops from random nodes, in process (p50/p99).

Every measurement runs ``--rounds`` times (at least 3): rates are min / median / max,
latencies and cost ratios those of the median round.

The report replaces the section after ``<!-- agents-benchmarks -->`` in --out.
"""

from __future__ import annotations

import argparse
import asyncio
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
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from rounds import MIN_ROUNDS, rate, repeat
from sections import write_section

import claimgraph

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- agents-benchmarks -->"
SCHEMA = """
principals: {admins: [admin]}
node_types: [service]
edge_types:
  - {name: calls, subject: service, object: service, writers: [{agent: tracer}],
     cardinality: many-to-many, conflict_policy: last-write-wins-with-timestamp}
"""


ASYNC_NOTE = (
    "Reading it: async reads share one event loop and httpx's async connection pool in one "
    "process; sync reads use one client per OS thread. Against one uvicorn process on 2 shared "
    "cores the async client falls behind as concurrency grows — probably the per-request cost "
    "of httpx's async pool and of the loop, which we have not profiled. Async is for many "
    "agents waiting in one process without threads, not for raw read throughput."
)


def say(msg: str) -> None:
    print(f"[bench_agents] {msg}", flush=True)


def build(path: Path, commands: int, services: int, seed: int) -> None:
    rnd = random.Random(seed)
    with claimgraph.open(path, create=True, graph="bench") as g:
        g.publish_schema(SCHEMA, agent="admin")
        batch: list[Any] = []
        for i in range(commands):
            a, b = rnd.randrange(services), rnd.randrange(services)
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
                    "polarity": "assert",
                    "confidence": rnd.random(),
                    "evidence": [],
                    "reasoning": "",
                    "asserted_at": 1_700_000_000_000 + i,
                    "based_on_version": None,
                    "properties": {},
                }
            )
            if len(batch) == 5000:
                g.submit(batch)
                batch = []
        if batch:
            g.submit(batch)


def stats(lat: list[float], wall: float) -> dict[str, float]:
    lat = sorted(lat)
    return {
        "n": len(lat),
        "per_s": len(lat) / wall,
        "mean_us": statistics.fmean(lat) * 1e6,
        "p50_us": lat[len(lat) // 2] * 1e6,
        "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
    }


def timed(fn: Callable[[random.Random], Any], n: int, seed: int) -> dict[str, float]:
    rnd = random.Random(seed)
    for _ in range(min(50, n)):
        fn(rnd)
    rnd = random.Random(seed)
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        fn(rnd)
        lat.append(time.perf_counter() - s)
    return stats(lat, time.perf_counter() - t0)


async def atimed(fn: Callable[[random.Random], Awaitable[Any]], n: int, seed: int) -> Any:
    rnd = random.Random(seed)
    for _ in range(min(50, n)):
        await fn(rnd)
    rnd = random.Random(seed)
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        await fn(rnd)
        lat.append(time.perf_counter() - s)
    return stats(lat, time.perf_counter() - t0)


def edge_args(services: int) -> Callable[[random.Random], dict[str, str]]:
    def args(rnd: random.Random) -> dict[str, str]:
        a, b = rnd.randrange(services), rnd.randrange(services)
        return {"edge_type": "calls", "subject": f"service:s{a}", "object": f"service:s{b}"}

    return args


def mcp_stdio(data: Path, services: int, n: int) -> dict[str, float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "claimgraph", "--data", str(data), "mcp", "--agent", "tracer"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    args = edge_args(services)

    async def go() -> dict[str, float]:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()

            async def one(rnd: random.Random) -> Any:
                return await s.call_tool("read_edge", args(rnd))

            out = await atimed(one, n, seed=11)
            await s.call_tool("end_run", {})
            return dict(out)

    return asyncio.run(go())


def mcp_http(url: str, token: str, services: int, n: int) -> dict[str, float]:
    args = edge_args(services)

    async def go() -> dict[str, float]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as client,
            streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
            ClientSession(r, w) as s,
        ):
            await s.initialize()

            async def one(rnd: random.Random) -> Any:
                return await s.call_tool("read_edge", args(rnd))

            out = await atimed(one, n, seed=11)
            await s.call_tool("end_run", {})
            return dict(out)

    return asyncio.run(go())


def async_reads(url: str, token: str, services: int, n: int, c: int) -> dict[str, float]:
    args = edge_args(services)

    async def go() -> dict[str, float]:
        g = await claimgraph.aconnect(url, token)
        rnd = random.Random(5)
        sem = asyncio.Semaphore(c)
        lat: list[float] = []

        async def one() -> None:
            a = args(rnd)
            async with sem:
                s = time.perf_counter()
                await g.edge(a["edge_type"], a["subject"], a["object"])
                lat.append(time.perf_counter() - s)

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        wall = time.perf_counter() - t0
        await g.aclose()
        return stats(lat, wall)

    return asyncio.run(go())


def sync_reads(url: str, token: str, services: int, n: int, c: int) -> dict[str, float]:
    args = edge_args(services)
    clients = [claimgraph.connect(url, token) for _ in range(c)]
    lat: list[float] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        rnd = random.Random(100 + i)
        g = clients[i]
        mine = []
        for _ in range(n // c):
            a = args(rnd)
            s = time.perf_counter()
            g.edge(a["edge_type"], a["subject"], a["object"])
            mine.append(time.perf_counter() - s)
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(c) as pool:
        list(pool.map(worker, range(c)))
    wall = time.perf_counter() - t0
    for g in clients:
        g.close()
    return stats(lat, wall)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--commands", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=1_000, help="tool calls per MCP measurement")
    ap.add_argument("--reads", type=int, default=2_000, help="reads per concurrency level")
    ap.add_argument("--starts", type=int, default=1_000, help="random start nodes for queries")
    ap.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "agents")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (>= 3): min / median / max")
    a = ap.parse_args()
    if a.rounds < MIN_ROUNDS:
        ap.error(f"--rounds must be at least {MIN_ROUNDS} (min / median / max)")
    k = a.rounds
    services = max(100, a.commands // 10)
    shutil.rmtree(a.dir, ignore_errors=True)
    a.dir.mkdir(parents=True)
    data = a.dir / "g"
    say(f"building {a.commands:,} claims over {services:,} services")
    build(data, a.commands, services, seed=7)
    res: dict[str, Any] = {}
    args = edge_args(services)

    # the SDK calls MCP wraps, in process, then MCP over stdio on the same data
    with claimgraph.open(data) as g:
        head = g.head()
        with g.run(agent="tracer") as run:
            res["sdk_inproc"] = repeat(
                k, lambda: timed(lambda r: run.edge(**_pos(args(r))), a.calls, seed=11)
            )
        starts = random.Random(3)
        nodes = [f"service:s{starts.randrange(services)}" for _ in range(a.starts)]
        pairs = [(n, f"service:s{starts.randrange(services)}") for n in nodes]
        res["reach"] = repeat(k, lambda: _each(lambda n: g.reach(n, max_hops=3, limit=1000), nodes))
        res["paths"] = repeat(k, lambda: _each(lambda p: g.paths(p[0], p[1], max_hops=3), pairs))
        sizes = [len(g.reach(n, max_hops=3, limit=1000).nodes) for n in nodes[:100]]
    say(f"in-process run.edge: {res['sdk_inproc']}")
    say(f"reach: {res['reach']}  paths: {res['paths']}")
    res["mcp_stdio"] = repeat(k, lambda: mcp_stdio(data, services, a.calls))
    say(f"MCP stdio read_edge: {res['mcp_stdio']}")

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server_log = a.dir / "serve.log"
    log_file = server_log.open("w")  # a line per request: a file, never an unread pipe
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "claimgraph",
            "--data",
            str(data),
            "serve",
            "--port",
            str(port),
            "--tick",
            "0",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
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
        with claimgraph.connect(url, token=token) as c, c.run(agent="admin") as run:
            res["sdk_http"] = repeat(
                k, lambda: timed(lambda r: run.edge(**_pos(args(r))), a.calls, seed=11)
            )
        say(f"HTTP SDK run.edge: {res['sdk_http']}")
        res["mcp_http"] = repeat(k, lambda: mcp_http(url, token, services, a.calls))
        say(f"MCP HTTP read_edge: {res['mcp_http']}")
        for conc in (1, 16, 64):
            res[f"async_{conc}"] = repeat(
                k, lambda c=conc: async_reads(url, token, services, a.reads, c)
            )
            res[f"sync_{conc}"] = repeat(
                k, lambda c=conc: sync_reads(url, token, services, a.reads, c)
            )
            say(f"c={conc}: async {res[f'async_{conc}']}  sync {res[f'sync_{conc}']}")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        log_file.close()
    shutil.rmtree(a.dir, ignore_errors=True)
    report = _report(a, services, head, res, sizes)
    print(report)
    if a.out:
        write_section(a.out, MARKER, report)
        say(f"wrote {a.out}")


def _pos(d: dict[str, str]) -> dict[str, str]:
    return {"edge_type": d["edge_type"], "subject": d["subject"], "obj": d["object"]}


def _each(fn: Callable[[Any], Any], items: list[Any]) -> dict[str, float]:
    lat = []
    t0 = time.perf_counter()
    for x in items:
        s = time.perf_counter()
        fn(x)
        lat.append(time.perf_counter() - s)
    return stats(lat, time.perf_counter() - t0)


def _report(a: Any, services: int, head: int, r: dict[str, Any], sizes: list[int]) -> str:
    def row(name: str, x: dict[str, float], base: dict[str, float] | None = None) -> str:
        ratio = f"{x['mean_us'] / base['mean_us']:,.1f}×" if base else ""
        return f"| {name} | {rate(x)} | {x['p50_us']:,.0f} | {x['p99_us']:,.0f} | {ratio} |"

    lines = [
        "## claimgraph benchmarks: agents (MCP, async SDK, paths and reach)",
        "",
        f"`make bench` runs `tools/bench_agents.py`. **Scale of this run: {a.commands:,} "
        f"claims over {services:,} services (head v{head:,})** — not the 1M-command graph; "
        f"{a.calls:,} tool calls per MCP measurement, {a.reads:,} reads per concurrency "
        f"level, {a.starts:,} random start nodes for paths/reach. Machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}; client and server on loopback. Each figure from "
        f"{a.rounds} rounds: rates as min / median / max, latencies and cost ratios from the "
        "median round.",
        "",
        "### MCP tool call vs the SDK call it wraps (`read_edge` vs `run.edge`, same reads)",
        "",
        "| call | calls/s | p50 µs | p99 µs | cost vs the wrapped call |",
        "|---|---:|---:|---:|---:|",
        row("SDK in process (`run.edge`)", r["sdk_inproc"]),
        row("MCP over stdio (`claimgraph mcp --agent`, embedded)", r["mcp_stdio"], r["sdk_inproc"]),
        row("HTTP SDK (`run.edge` over `connect`)", r["sdk_http"]),
        row("MCP over streamable HTTP (`/mcp`)", r["mcp_http"], r["sdk_http"]),
        "",
        "### Async vs sync HTTP reads (`edge`, one client per thread for sync)",
        "",
        "| concurrency | async reads/s | p50 µs | p99 µs | sync reads/s | p50 µs | p99 µs |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in (1, 16, 64):
        x, y = r[f"async_{c}"], r[f"sync_{c}"]
        lines.append(
            f"| {c} | {rate(x)} | {x['p50_us']:,.0f} | {x['p99_us']:,.0f} "
            f"| {rate(y)} | {y['p50_us']:,.0f} | {y['p99_us']:,.0f} |"
        )
    lines += [
        "",
        ASYNC_NOTE,
        "",
        "### paths and reach at 3 hops, in process",
        "",
        "| query | p50 µs | p99 µs | per s |",
        "|---|---:|---:|---:|",
        f"| reach(node, max_hops=3, limit=1000) | {r['reach']['p50_us']:,.0f} "
        f"| {r['reach']['p99_us']:,.0f} | {rate(r['reach'], 1)} |",
        f"| paths(src, dst, max_hops=3) | {r['paths']['p50_us']:,.0f} "
        f"| {r['paths']['p99_us']:,.0f} | {rate(r['paths'], 1)} |",
        "",
        f"Nodes reached within 3 hops (first 100 starts): median "
        f"{statistics.median(sizes):,.0f}, max {max(sizes):,}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
