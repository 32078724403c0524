#!/usr/bin/env python3
"""claimgraph benchmarks on the embedded runtime; writes a Markdown report (``make bench``).

    .venv/bin/python tools/bench.py --out BENCHMARKS.md            # 1,000,000 commands
    .venv/bin/python tools/bench.py --quick --out /tmp/bench.md    # 50,000 commands, ~1 minute

Phases (workload: tools/workload.py; data under bench-data/, removed unless --keep):

1. generate and Avro-encode the command stream to a file (not timed as ingest);
2. ingest in a child process: ``Graph.append`` of encoded commands in chunks, each followed
   by ``Graph.process()`` (durable: synced log writes) -> commands/s; the child's peak RSS is
   read with ``resource.getrusage(RUSAGE_CHILDREN)``;
3. a second, smaller ingest under cProfile, in its own child and directory;
4. reads in this process on the ingested graph (``open_graph`` -> ``graph.reader``): as-of
   point reads of existing edges at random versions against raw rocksdict ``get`` (and raw
   ``seek``) of the same projection DB in interleaved rounds, neighbors of ~10-edge nodes
   against a raw prefix scan, and cProfile of both;
5. re-projection of the decisions log into a fresh projection in a child (as ``audit``
   does), against a read+decode-only pass over the same log, and a byte comparison of the
   rebuilt projection with the live one.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import os
import platform
import pstats
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import workload
from sections import write_head
from workload import EXPECTED, GRAPH, HUB_DEGREE, WEIGHTS, generate, read_frames

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent

TARGETS = {
    "ingest": 30_000.0,  # commands/s, >=
    "point_read": 100_000.0,  # reads/s, >=
    "point_read_ratio": 0.50,  # of raw get, >=
    "neighbors": 25_000.0,  # queries/s, >=
    "reproject": 60_000.0,  # decisions/s, >=
    "rss_mib": 500.0,  # MiB, <=
}

# children inherit the parent's start time, so every progress line shares one clock
_T_START = float(os.environ.setdefault("CLAIMGRAPH_BENCH_T0", repr(time.time())))


def log(msg: str) -> None:
    el = time.time() - _T_START
    print(f"[bench {int(el) // 60:02d}:{int(el) % 60:02d}] {msg}", file=sys.stderr, flush=True)


# -- GC accounting (children) ----------------------------------------------------------------


class GcTimer:
    """Wall time spent in the cyclic garbage collector, by generation."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._t = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            g = int(info.get("generation", 0))
            self.seconds[g] += time.perf_counter() - self._t
            self.count[g] += 1

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "count": self.count}


def rss_kib() -> int:
    """This process's current resident set size (KiB), from /proc/self/status."""
    try:
        for ln in Path("/proc/self/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    except OSError:
        pass
    return 0


# -- child: ingest ---------------------------------------------------------------------------


def child_ingest(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bench.py _ingest")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--commands-file", type=Path, required=True)
    p.add_argument("--chunk", type=int, required=True)
    p.add_argument("--limit", type=int, required=True)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--profile", type=Path)
    p.add_argument("--outcomes", type=Path)
    a = p.parse_args(argv)

    from claimgraph.core.wire import decode_decision
    from claimgraph.service.graph import open_graph

    gct = GcTimer()
    rss = {"start": rss_kib()}
    g = open_graph(a.data, create=True, graph=GRAPH)
    rss["opened"] = rss_kib()
    prof = cProfile.Profile() if a.profile else None
    t_append = t_process = 0.0
    done = 0
    chunk_rates: list[float] = []
    label = "profiled ingest" if prof else "ingest"
    with open(a.commands_file, "rb") as f:
        start = time.perf_counter()
        last = start
        cpu_thread = cpu_process = 0.0
        while done < a.limit:
            batch = read_frames(f, min(a.chunk, a.limit - done))
            if not batch:
                break
            if prof is not None:
                prof.enable()
            c0, p0 = time.thread_time(), time.process_time()
            t0 = time.perf_counter()
            g.append(batch)
            t1 = time.perf_counter()
            n = g.process()
            t2 = time.perf_counter()
            cpu_thread += time.thread_time() - c0
            cpu_process += time.process_time() - p0
            if prof is not None:
                prof.disable()
            if n != len(batch):
                raise SystemExit(f"process() decided {n} commands, expected {len(batch)}")
            t_append += t1 - t0
            t_process += t2 - t1
            done += n
            chunk_rates.append(n / (t2 - t0))
            if t2 - last >= 5.0:
                last = t2
                log(
                    f"{label}: {done:,}/{a.limit:,} commands "
                    f"({done / (t_append + t_process):,.0f}/s)"
                )
        wall = time.perf_counter() - start
    rss["ingested"] = rss_kib()
    rocks = {"log": rocksdb_memory(g.logs.db), "projection": rocksdb_memory(g.projection.db)}
    gc_ingest = gct.as_dict()
    head = g.head()
    end = g.logs.decisions.end()
    if prof is not None:
        prof.dump_stats(str(a.profile))
    legend: dict[str, int] = {}
    totals: Counter[str] = Counter()
    if a.outcomes is not None:
        log(f"{label}: reading back {end:,} decisions (not timed)")
        codes = bytearray()
        pos = 0
        while pos < end:
            recs = g.logs.decisions.read(pos, 4096)
            if not recs:
                break
            for r in recs:
                d = decode_decision(r.value)
                o = f"{d['kind']}/{d['reason']}"
                totals[o] += 1
                code = legend.setdefault(o, len(legend))
                codes.append(code)
            pos = recs[-1].offset + 1
        a.outcomes.write_bytes(bytes(codes))
    g.close()
    a.result.write_text(
        json.dumps(
            {
                "commands": done,
                "append_s": t_append,
                "process_s": t_process,
                "wall_s": wall,
                "head": head,
                "decisions": end,
                "chunk_rates": chunk_rates,
                "cpu_thread_s": cpu_thread,
                "cpu_process_s": cpu_process,
                "gc": gc_ingest,
                "legend": legend,
                "outcomes": dict(totals),
                "rss_kib": rss,
                "rocksdb_memory": rocks,
                "self_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )
    return 0


# -- child: re-projection --------------------------------------------------------------------


def child_reproject(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bench.py _reproject")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--fresh", type=Path, required=True)
    p.add_argument("--result", type=Path, required=True)
    a = p.parse_args(argv)

    from claimgraph.core.state import GraphState
    from claimgraph.core.wire import decode_decision
    from claimgraph.logs.embedded import EmbeddedLogStore
    from claimgraph.projections.projector import ProjectionStore, Projector
    from claimgraph.streams.embedded import fold_decisions

    logs = EmbeddedLogStore(a.data / "log")
    n = logs.decisions.end()
    log(f"re-projection baseline: read + decode {n:,} decisions")
    t0 = time.perf_counter()
    pos = 0
    while pos < n:
        recs = logs.decisions.read(pos, 4096)
        if not recs:
            break
        for r in recs:
            decode_decision(r.value)
        pos = recs[-1].offset + 1
    decode_s = time.perf_counter() - t0

    gct = GcTimer()
    state = GraphState(GRAPH)
    store = ProjectionStore(a.fresh, create=True)
    projector = Projector(store, state)
    last = [time.perf_counter()]
    t1 = time.perf_counter()
    c1 = time.thread_time()

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 5.0:
            last[0] = now
            log(f"re-projection: {done:,}/{total:,} decisions ({done / (now - t1):,.0f}/s)")

    fold_decisions(logs, state, projector, progress=progress)
    fold_s = time.perf_counter() - t1
    fold_cpu_s = time.thread_time() - c1
    applied = store.applied()
    store.close()
    logs.close()
    a.result.write_text(
        json.dumps(
            {
                "decisions": n,
                "decode_s": decode_s,
                "fold_s": fold_s,
                "fold_cpu_s": fold_cpu_s,
                "applied": applied,
                "gc": gct.as_dict(),
            }
        )
    )
    return 0


# -- running children ------------------------------------------------------------------------


def child_cmd(mode: str, *args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), mode, *args]


def run_child(cmd: list[str]) -> int:
    """Run a child; return its own peak RSS (KiB) from wait4."""
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {shlex.join(cmd)}")
    return int(ru.ru_maxrss)


# -- profiles --------------------------------------------------------------------------------


def _label(file: str, line: int, name: str) -> str:
    if file == "~":
        return name
    path = Path(file)
    try:
        rel = str(path.resolve().relative_to(ROOT))
    except ValueError:
        parts = path.parts
        rel = (
            "/".join(parts[parts.index("site-packages") + 1 :])
            if "site-packages" in parts
            else "/".join(parts[-2:])
        )
    return f"{rel}:{line}({name})"


def _category(file: str, name: str) -> str:
    if file == "~":
        if "Rdict" in name or "WriteBatch" in name:
            return "rocksdict calls (RocksDB)"
        if "fastavro" in name:
            return "fastavro"
        if "pydantic_core" in name or "_json" in name:
            return "JSON codec (compiled)"
        return "builtins (dict/list/str/struct/...)"
    f = file.replace(os.sep, "/")
    if f.startswith("<") and " " in f:  # code generated and exec'd at run time
        return "generated code: " + f[1:].rstrip(">").split(" #", 1)[0]
    if "/claimgraph/" in f:
        return "claimgraph/" + f.split("/claimgraph/", 1)[1]
    if "/json/" in f:
        return "json (stdlib; its C scanner/encoder runs inside)"
    if "/fastavro/" in f:
        return "fastavro"
    if f.startswith(str(TOOLS)):
        return "benchmark harness"
    return "other Python: " + Path(f).name


def profile_summary(stats: pstats.Stats, n: int = 15) -> dict[str, Any]:
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total = float(stats.total_tt)  # type: ignore[attr-defined]
    rows = []
    cats: Counter[str] = Counter()
    for (file, line, name), (_cc, nc, tt, ct, _callers) in raw.items():
        rows.append({"fn": _label(file, line, name), "ncalls": nc, "tottime": tt, "cumtime": ct})
        cats[_category(file, name)] += tt
    by_tt = sorted(rows, key=lambda r: -r["tottime"])[:n]
    by_ct = sorted(rows, key=lambda r: -r["cumtime"])[:n]
    return {"total": total, "tottime": by_tt, "cumtime": by_ct, "categories": cats.most_common(12)}


def profile_call(fn: Callable[[], None], path: Path) -> dict[str, Any]:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    prof.dump_stats(str(path))
    return profile_summary(pstats.Stats(str(path)))


# -- reads -----------------------------------------------------------------------------------


def _rate(n: int, fn: Callable[[], None], cpu: list[float]) -> float:
    """Operations per wall-clock second; appends operations per thread-CPU second to ``cpu``."""
    c0 = time.thread_time()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    cpu.append(n / max(time.thread_time() - c0, 1e-9))
    return n / wall


def bench_reads(
    g: Any, wl: workload.Workload, head: int, a: argparse.Namespace, rng: random.Random, pdir: Path
) -> dict[str, Any]:
    from claimgraph.core.state import SEP, edge_key
    from claimgraph.projections.rows import ADJ, EDGE, entity_key

    reader = g.reader
    db = g.projection.db
    out: dict[str, Any] = {}

    # -- as-of point reads over existing edges
    n = a.reads
    picks = [wl.edges[rng.randrange(len(wl.edges))] for _ in range(n)]
    queries = []
    get_keys = []
    seek_keys = []
    for et, st, si, ot, oi, v in picks:
        at = rng.randint(v, head)
        queries.append((et, (st, si), (ot, oi), at))
        ek = edge_key(et, st, si, ot, oi)
        get_keys.append(entity_key(EDGE, ek, v))  # the row written when the edge was created
        seek_keys.append(entity_key(EDGE, ek, at))  # the as-of target the MVCC read seeks
    edge = reader.edge
    get = db.get
    new_iter = db.iter

    def run_edge() -> None:
        for et, s, o, at in queries:
            edge(et, s, o, at)

    def run_get() -> None:
        for k in get_keys:
            get(k)

    def run_seek() -> None:
        for k in seek_keys:
            it = new_iter()
            it.seek(k)
            if it.valid():
                it.key()
                it.value()

    states = Counter(edge(et, s, o, at).state for et, s, o, at in queries)
    misses = sum(1 for k in get_keys if get(k) is None)
    by_type = Counter(q[0] for q in queries)
    log(f"point reads: {n:,} queries, warm-up pass")
    run_edge()
    run_get()
    run_seek()
    rounds: dict[str, list[float]] = {"edge": [], "get": [], "seek": []}
    cpu: dict[str, list[float]] = {"edge": [], "get": [], "seek": []}
    for r in range(a.rounds):
        rounds["edge"].append(_rate(n, run_edge, cpu["edge"]))
        rounds["get"].append(_rate(n, run_get, cpu["get"]))
        rounds["seek"].append(_rate(n, run_seek, cpu["seek"]))
        log(
            f"point reads round {r + 1}/{a.rounds}: reader.edge {rounds['edge'][-1]:,.0f}/s, "
            f"raw get {rounds['get'][-1]:,.0f}/s, raw seek {rounds['seek'][-1]:,.0f}/s"
        )
    out["point"] = {
        "n": n,
        "rounds": rounds,
        "states": dict(states),
        "get_misses": misses,
        "by_type": dict(by_type),
        "cpu": cpu,
        "paired_ratio": [e / g_ for e, g_ in zip(rounds["edge"], rounds["get"], strict=True)],
    }

    # -- neighbors of ~10-edge nodes
    nq = a.neighbor_queries
    complete = [v for _, v in wl.hubs]
    nqueries = []
    for _ in range(nq):
        at = rng.randint(complete[0], head)
        i = bisect_right(complete, at)
        nqueries.append((("bin", wl.hubs[rng.randrange(i)][0]), at))
    prefixes = [ADJ + (SEP.join((node[0], node[1], "out")) + SEP).encode() for node, _ in nqueries]
    neighbors = reader.neighbors

    def run_neighbors() -> None:
        for node, at in nqueries:
            neighbors(node, at)

    def run_scan() -> None:
        for p in prefixes:
            it = new_iter()
            it.seek(p)
            while it.valid():
                k = it.key()
                if not k.startswith(p):
                    break
                it.value()
                it.next()

    sizes = [len(neighbors(node, at)) for node, at in nqueries]
    nstates: Counter[str] = Counter()
    for node, at in nqueries[:2000]:
        nstates.update(x.state for x in neighbors(node, at))
    rows_scanned = 0
    for p in prefixes[:2000]:
        it = new_iter()
        it.seek(p)
        while it.valid() and it.key().startswith(p):
            rows_scanned += 1
            it.next()
    log(f"neighbors: {nq:,} queries, warm-up pass")
    run_neighbors()
    run_scan()
    nrounds: dict[str, list[float]] = {"neighbors": [], "scan": []}
    ncpu: dict[str, list[float]] = {"neighbors": [], "scan": []}
    for r in range(a.rounds):
        nrounds["neighbors"].append(_rate(nq, run_neighbors, ncpu["neighbors"]))
        nrounds["scan"].append(_rate(nq, run_scan, ncpu["scan"]))
        log(
            f"neighbors round {r + 1}: reader.neighbors {nrounds['neighbors'][-1]:,.0f}/s, "
            f"raw prefix scan {nrounds['scan'][-1]:,.0f}/s"
        )
    out["neighbors"] = {
        "n": nq,
        "rounds": nrounds,
        "avg_size": statistics.fmean(sizes),
        "min_size": min(sizes),
        "max_size": max(sizes),
        "size_hist": dict(sorted(Counter(sizes).items())),
        "states": dict(nstates),
        "rows_per_scan": rows_scanned / min(2000, nq),
        "cpu": ncpu,
    }

    # -- profiles
    pn = min(n, a.profile_reads)
    log(f"profiling {pn:,} point reads")
    sub = queries[:pn]

    def prof_edge() -> None:
        for et, s, o, at in sub:
            edge(et, s, o, at)

    out["profile_point"] = profile_call(prof_edge, pdir / "point_reads.pstats")
    out["profile_point"]["n"] = pn
    pq = min(nq, max(1, a.profile_reads // 2))
    nsub = nqueries[:pq]

    def prof_neighbors() -> None:
        for node, at in nsub:
            neighbors(node, at)

    log(f"profiling {pq:,} neighbors queries")
    out["profile_neighbors"] = profile_call(prof_neighbors, pdir / "neighbors.pstats")
    out["profile_neighbors"]["n"] = pq
    return out


# -- projections comparison ------------------------------------------------------------------


def digest_rows(path: Path) -> tuple[str, dict[str, int]]:
    """Hash every row except the meta family (M); count rows per family."""
    from claimgraph.logs.embedded import open_rdict

    db = open_rdict(path, create=False)
    h = hashlib.blake2b(digest_size=16)
    fam: Counter[str] = Counter()
    it = db.iter()
    it.seek_to_first()
    while it.valid():
        k = it.key()
        f = k[:1]
        if f != b"M":
            v = it.value()
            h.update(len(k).to_bytes(4, "little"))
            h.update(k)
            h.update(len(v).to_bytes(4, "little"))
            h.update(v)
            fam[f.decode()] += 1
        it.next()
    db.close()
    return h.hexdigest(), dict(sorted(fam.items()))


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- environment -----------------------------------------------------------------------------


def source_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "claimgraph").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        models = [
            ln.split(":", 1)[1].strip()
            for ln in cpuinfo.splitlines()
            if ln.startswith("model name")
        ]
        info["cpu_model"] = models[0] if models else platform.processor() or "unknown"
        info["cpu_logical"] = len(models) or os.cpu_count()
        mhz = [
            ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("cpu MHz")
        ]
        info["cpu_mhz"] = mhz[0] if mhz else "?"
    except OSError:
        info["cpu_model"] = platform.processor() or "unknown"
    info["nproc"] = len(os.sched_getaffinity(0))
    try:
        mem = {
            ln.split(":")[0]: ln.split(":")[1].strip()
            for ln in Path("/proc/meminfo").read_text().splitlines()
        }
        info["mem_total"] = mem.get("MemTotal", "?")
        info["mem_available"] = mem.get("MemAvailable", "?")
    except OSError:
        pass
    try:
        info["cgroup_cpu_max"] = Path("/sys/fs/cgroup/cpu.max").read_text().strip()
    except OSError:
        info["cgroup_cpu_max"] = "n/a"
    info["kernel"] = platform.release()
    info["os"] = platform.platform()
    return info


PHASES: list[tuple[str, str]] = []  # (phase, 1-minute load average when it started)


def phase(name: str, msg: str) -> None:
    """Log the start of a phase and remember the machine's load at that moment."""
    PHASES.append((name, loadavg().split()[0]))
    log(msg)


def rocksdb_memory(db: Any) -> dict[str, int]:
    """RocksDB's own memory accounting for one open database (bytes; -1 if unavailable)."""
    out = {}
    for prop in (
        "rocksdb.cur-size-all-mem-tables",
        "rocksdb.block-cache-usage",
        "rocksdb.estimate-table-readers-mem",
    ):
        try:
            out[prop.split(".", 1)[1]] = int(db.property_int_value(prop))
        except Exception:
            out[prop.split(".", 1)[1]] = -1
    return out


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def versions() -> dict[str, str]:
    out = {"python": f"{platform.python_implementation()} {platform.python_version()}"}
    for dist in ("claimgraph", "rocksdict", "fastavro", "pydantic", "PyYAML"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def git_info() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "claimgraph"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        n = len([ln for ln in dirty.splitlines() if ln.strip()])
        return f"{rev}" + (
            f" + uncommitted changes in {n} file(s) under claimgraph/" if n else " (clean)"
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -- report ----------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB ({kib * 1024 / 1e6:,.0f} MB)"


def _profile_tables(p: dict[str, Any], what: str) -> list[str]:
    total = p["total"] or 1.0
    out = [
        f"Total profiled time: {p['total']:.2f} s for {p['n']:,} {what} "
        "(cProfile adds overhead; read the shares, not the absolute times).",
        "",
        "Share of own time (tottime) by component:",
        "",
        "| component | tottime s | share |",
        "|---|---:|---:|",
    ]
    for cat, tt in p["categories"]:
        out.append(f"| {cat} | {tt:.2f} | {100 * tt / total:.1f}% |")
    for key, title in (("tottime", "own time (tottime)"), ("cumtime", "cumulative time")):
        out += [
            "",
            f"Top {len(p[key])} functions by {title}:",
            "",
            "| function | calls | tottime s | cumtime s | tottime share |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in p[key]:
            fn = r["fn"].replace("|", "\\|")
            out.append(
                f"| `{fn}` | {r['ncalls']:,} | {r['tottime']:.2f} | {r['cumtime']:.2f} "
                f"| {100 * r['tottime'] / total:.1f}% |"
            )
    return out


def write_report(path: Path, r: dict[str, Any]) -> None:
    ing = r["ingest"]
    ingest_rate = statistics.median(x["rate"] for x in r["ingest_runs"])
    pt = r["reads"]["point"]
    edge_med = statistics.median(pt["rounds"]["edge"])
    get_med = statistics.median(pt["rounds"]["get"])
    seek_med = statistics.median(pt["rounds"]["seek"])
    ratio = edge_med / get_med
    nb = r["reads"]["neighbors"]
    nb_med = statistics.median(nb["rounds"]["neighbors"])
    scan_med = statistics.median(nb["rounds"]["scan"])
    rp = r["reproject"]
    rp_rate = statistics.median(x["rate"] for x in r["reproject_runs"])
    dec_rate = statistics.median(x["decode_rate"] for x in r["reproject_runs"])
    med = statistics.median
    ingest_cpu = ing["commands"] / ing["cpu_thread_s"]
    edge_cpu, get_cpu = med(pt["cpu"]["edge"]), med(pt["cpu"]["get"])
    nb_cpu = med(nb["cpu"]["neighbors"])
    rp_cpu = rp["decisions"] / rp["fold_cpu_s"]
    rss_kib = r["rss_children_kib"]
    rss_ok = rss_kib / 1024 <= TARGETS["rss_mib"]
    m = r["machine"]
    v = r["versions"]
    full = r["commands"] >= 1_000_000

    L: list[str] = []
    L += [
        "# claimgraph benchmarks",
        "",
        f"Generated by `tools/bench.py` on {r['date']} "
        f"({'full run' if full else 'reduced run: ' + format(r['commands'], ',') + ' commands'}"
        f"; wall time {r['wall_s'] / 60:.1f} min). Every number below was measured in this "
        "run; baselines were measured in the same run on the same data.",
        "",
        "## Summary",
        "",
        "| metric | measured (wall clock) | target | result | per CPU-second ¹ |",
        "|---|---:|---:|---|---:|",
        f"| ingest, governor + projector end to end, durable (commands/s) | "
        f"{_n(ingest_rate)} | >= {_n(TARGETS['ingest'])} | "
        f"{_verdict(ingest_rate >= TARGETS['ingest'])} | {_n(ingest_cpu)} |",
        f"| as-of point read `reader.edge` (reads/s) | {_n(edge_med)} | "
        f">= {_n(TARGETS['point_read'])} | {_verdict(edge_med >= TARGETS['point_read'])} "
        f"| {_n(edge_cpu)} |",
        f"| point read / raw rocksdict `get`, same DB, same run | {ratio:.1%} "
        f"({_n(edge_med)} / {_n(get_med)}) | >= {TARGETS['point_read_ratio']:.0%} | "
        f"{_verdict(ratio >= TARGETS['point_read_ratio'])} | {edge_cpu / get_cpu:.1%} |",
        f"| neighbors, ~{nb['avg_size']:.1f} edges per result (queries/s) | {_n(nb_med)} | "
        f">= {_n(TARGETS['neighbors'])} | {_verdict(nb_med >= TARGETS['neighbors'])} "
        f"| {_n(nb_cpu)} |",
        f"| re-projection from the decisions log (decisions/s) | {_n(rp_rate)} | "
        f">= {_n(TARGETS['reproject'])} | {_verdict(rp_rate >= TARGETS['reproject'])} "
        f"| {_n(rp_cpu)} |",
        f"| peak RSS of the ingest process, {r['commands']:,} commands | {_mib(rss_kib)} | "
        f"<= {TARGETS['rss_mib']:.0f} MiB | {_verdict(rss_ok)} | |",
        "",
        "¹ Operations per second of CPU time of the measuring thread (`time.thread_time()`): "
        "what the code costs when it has a core to itself. It excludes RocksDB's background "
        "threads and waits for I/O (fsync), so it is an upper bound, not a result; pass/fail "
        "is judged on wall-clock throughput. A large gap between the two columns means the "
        "benchmark was starved by other load on this shared 2-core machine (load averages "
        "below).",
        "",
    ]
    if not full:
        L += [
            "> This is a reduced run; the targets are stated for 1,000,000 commands. "
            "Run `make bench` for the real numbers.",
            "",
        ]
    mmm = lambda v: " / ".join(_n(x) for x in (min(v), med(v), max(v)))  # noqa: E731
    L += [
        "Read throughputs are the median of interleaved rounds (per-round numbers below). "
        "Ingest and re-projection figures are the median of their runs (each a whole pass "
        "over the stream, in its own child and directory; the detailed tables below are of "
        "the first). Min / median / max, each beside its baseline from the same runs:",
        "",
        "| figure (per second) | min / median / max | baseline, same rounds | baseline is |",
        "|---|---:|---:|---|",
        f"| point reads `reader.edge` | {mmm(pt['rounds']['edge'])} | "
        f"{mmm(pt['rounds']['get'])} | raw `get` of existing keys |",
        f"| point reads `reader.edge` | {mmm(pt['rounds']['edge'])} | "
        f"{mmm(pt['rounds']['seek'])} | raw `iter()` + `seek` |",
        f"| neighbors | {mmm(nb['rounds']['neighbors'])} | {mmm(nb['rounds']['scan'])} | "
        "raw prefix scan of the adjacency rows |",
        f"| ingest, {len(r['ingest_runs'])} runs (commands) | "
        f"{mmm([x['rate'] for x in r['ingest_runs']])} | "
        f"{mmm([x['append_rate'] for x in r['ingest_runs']])} | no-logic write of the same "
        "bytes: `Graph.append` (a synced log write) alone |",
        f"| re-projection, {len(r['reproject_runs'])} runs (decisions) | "
        f"{mmm([x['rate'] for x in r['reproject_runs']])} | "
        f"{mmm([x['decode_rate'] for x in r['reproject_runs']])} | read + decode only |",
        "",
        "Ratios to baselines:",
        "",
        f"- point read vs raw `get` of existing keys: **{ratio:.1%}**; vs raw `iter()+seek` "
        f"(the primitive an as-of read needs): {edge_med / seek_med:.1%}; raw seek vs raw get: "
        f"{seek_med / get_med:.1%}",
        f"- neighbors vs raw prefix scan of the same adjacency rows: {nb_med / scan_med:.1%}",
        f"- re-projection vs read + Avro-decode only of the same log: {rp_rate / dec_rate:.1%}",
        f"- ingest vs `Graph.append` alone (synced log write of the encoded commands): "
        f"{ingest_rate / statistics.median(x['append_rate'] for x in r['ingest_runs']):.1%}",
        "",
    ]

    L += [
        "## Machine and software",
        "",
        f"- CPU: {m.get('cpu_model')} — {m.get('cpu_logical')} logical CPUs in /proc/cpuinfo, "
        f"nproc {m['nproc']}, {m.get('cpu_mhz')} MHz; cgroup cpu.max: "
        f"{m.get('cgroup_cpu_max')}",
        f"- memory: {m.get('mem_total')} total, {m.get('mem_available')} available at start",
        f"- OS: {m.get('os')}",
        f"- load average (1/5/15 min): {r['load_start']} at start, {r['load_end']} at end "
        "(shared, noisy machine; 2 cores); 1-minute load when each phase started: "
        + ", ".join(f"{name} {load}" for name, load in r["phases"]),
        f"- Python {v['python']}; rocksdict {v['rocksdict']}; fastavro {v['fastavro']}; "
        f"pydantic {v['pydantic']}; PyYAML {v['PyYAML']}; claimgraph {v['claimgraph']}",
        f"- source: git {r['git']}; digest of claimgraph/*.py {r['src_start']}"
        + (
            ""
            if r["src_start"] == r["src_end"]
            else f" at start, **{r['src_end']} at end (the package changed during the run)**"
        ),
        "",
        "Command:",
        "",
        "```",
        r["command"],
        "```",
        "",
        "`make bench` runs `.venv/bin/python tools/bench.py --out BENCHMARKS.md`. "
        "Data lived under `bench-data/` and was "
        + ("kept (--keep)." if r["keep"] else "removed at the end."),
        "",
    ]

    # workload
    total_cmds = r["commands"]
    L += [
        "## Workload",
        "",
        f"{total_cmds:,} commands (tools/workload.py, seed {r['seed']}): command 0 publishes "
        "the benchmark schema (inline in tools/workload.py: `stocks` many-to-many/quarantine/"
        "on_stale accept for the bulk edges, `located_in` many-to-one/last-write-wins/"
        "on_stale accept, `reserved_for` many-to-one/last-write-wins/on_stale reject, "
        "`custodian_of` one-to-many/quarantine/on_stale quarantine), then claims. "
        f"Bins receive exactly {HUB_DEGREE} `stocks` edges each, so neighbors queries return "
        f"~{HUB_DEGREE} edges. Commands are Avro-encoded (uuid command ids, one evidence "
        "item, short reasoning) and written to a file before the ingest is timed; "
        f"generating and encoding them ran at {_n(total_cmds / r['gen_s'])}/s "
        f"({r['gen_bytes'] / total_cmds:.0f} bytes per command on average).",
        "",
        "| category | target share | commands | share | decisions it produced |",
        "|---|---:|---:|---:|---|",
    ]
    xt: dict[str, Counter[str]] = r["crosstab"]
    for cat in ("publish_schema", *WEIGHTS):
        cnt = r["mix"].get(cat, 0)
        outs = ", ".join(f"{o} {c:,}" for o, c in xt.get(cat, Counter()).most_common())
        exp = set(EXPECTED[cat])
        ok = all(o in exp for o in xt.get(cat, Counter()))
        L.append(
            f"| {cat} | {WEIGHTS.get(cat, 0):.1f}% | {cnt:,} | {100 * cnt / total_cmds:.2f}% "
            f"| {outs}{'' if ok else ' **(unexpected)**'} |"
        )
    new = sum(r["mix"].get(c, 0) for c in workload.NEW_EDGE_CATEGORIES)
    L += [
        "",
        f"New edges: {new:,} ({100 * new / total_cmds:.1f}%); conflicting or stale: "
        f"{total_cmds - new - 1:,} ({100 * (total_cmds - new - 1) / total_cmds:.1f}%). "
        f"{r['fallbacks']:,} draws fell back to a new `stocks` edge because their category "
        "had no target yet (start of the stream).",
        "",
    ]

    # ingest
    cr = sorted(ing["chunk_rates"])
    k = max(1, len(ing["chunk_rates"]) // 10)
    first = statistics.fmean(ing["chunk_rates"][:k])
    last = statistics.fmean(ing["chunk_rates"][-k:])
    L += [
        "## Ingest (governor + projector, durable)",
        "",
        f"One child process: `open_graph(create=True)`, then for each chunk of {r['chunk']:,} "
        "encoded commands `Graph.append(chunk)` (one synced RocksDB write) and "
        "`Graph.process()` (decides in batches of 2,048: each batch's decisions and the "
        "governor position are one synced write, then the projector writes the rows).",
        "",
        "| | value |",
        "|---|---:|",
        f"| commands decided | {ing['commands']:,} (head version {ing['head']:,}) |",
        f"| append time (sum) | {ing['append_s']:.1f} s ({_n(ing['commands'] / ing['append_s'])}"
        " commands/s) |",
        f"| process time (sum) | {ing['process_s']:.1f} s "
        f"({_n(ing['commands'] / ing['process_s'])} commands/s) |",
        f"| **end to end** | **{ing['append_s'] + ing['process_s']:.1f} s → "
        f"{_n(ingest_rate)} commands/s** |",
        f"| per-chunk rate p10 / median / p90 | {_n(cr[len(cr) // 10])} / "
        f"{_n(statistics.median(cr))} / {_n(cr[(9 * len(cr)) // 10])} |",
        f"| first 10% of chunks vs last 10% | {_n(first)} → {_n(last)} commands/s |",
        f"| CPU time: main thread / whole process (incl. RocksDB threads) | "
        f"{ing['cpu_thread_s']:.1f} s / {ing['cpu_process_s']:.1f} s |",
        f"| cyclic GC during ingest | {sum(ing['gc']['seconds']):.1f} s "
        f"({ing['gc']['count'][2]} full collections: {ing['gc']['seconds'][2]:.1f} s) |",
        f"| peak RSS (RUSAGE_CHILDREN after the child exited) | {_mib(rss_kib)} |",
        f"| RSS at start / after `open_graph` / after the last chunk | "
        f"{ing['rss_kib']['start'] / 1024:,.0f} / {ing['rss_kib']['opened'] / 1024:,.0f} / "
        f"{ing['rss_kib']['ingested'] / 1024:,.0f} MiB |",
        "| RocksDB memory after the last chunk, log / projection (memtables, block cache, "
        "table readers) | "
        + " / ".join(
            ", ".join(f"{v / 2**20:,.0f}" for v in ing["rocksdb_memory"][db].values())
            for db in ("log", "projection")
        )
        + " MiB |",
        f"| disk: commands + decisions log | {r['disk_log'] / 1e6:,.0f} MB |",
        f"| disk: projection | {r['disk_projection'] / 1e6:,.0f} MB |",
        "",
    ]

    # reads
    L += [
        "## Reads",
        "",
        f"In the benchmark process after `open_graph` of the ingested data ({r['open_s']:.2f} s;"
        " opening folds nothing: the governor's state is built on the first write). Queries "
        "are prepared before timing; rounds interleave the reader with its raw baselines.",
        "",
        f"### As-of point reads ({pt['n']:,} per round)",
        "",
        "Each query picks a created edge uniformly and a version uniformly between the "
        "version that created it and head, and calls "
        "`graph.reader.edge(edge_type, subject, object, at)`. Baselines on the same "
        "projection DB: raw `db.get(key)` of the row each edge was created with (existing "
        "keys; misses: " + f"{pt['get_misses']}), and raw `db.iter()` + `seek(as-of key)` + "
        "`key()` + `value()`.",
        "",
        "Results seen: "
        + ", ".join(f"{s} {c:,}" for s, c in sorted(pt["states"].items()))
        + "; by edge type: "
        + ", ".join(f"{t} {c:,}" for t, c in sorted(pt["by_type"].items()))
        + ".",
        "",
        "| round | reader.edge /s | raw get /s | raw seek /s | edge / get "
        "| per CPU-s: edge / get / seek |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for i in range(len(pt["rounds"]["edge"])):
        L.append(
            f"| {i + 1} | {_n(pt['rounds']['edge'][i])} | {_n(pt['rounds']['get'][i])} | "
            f"{_n(pt['rounds']['seek'][i])} | {pt['paired_ratio'][i]:.1%} | "
            f"{_n(pt['cpu']['edge'][i])} / {_n(pt['cpu']['get'][i])} / "
            f"{_n(pt['cpu']['seek'][i])} |"
        )
    L += [
        f"| **median** | **{_n(edge_med)}** | **{_n(get_med)}** | **{_n(seek_med)}** | "
        f"**{ratio:.1%}** | **{_n(edge_cpu)} / {_n(get_cpu)} / {_n(med(pt['cpu']['seek']))}** |",
        "",
        f"### Neighbors ({nb['n']:,} per round)",
        "",
        f"`graph.reader.neighbors(('bin', id), at)` for a bin whose {HUB_DEGREE} edges all "
        "exist at a version drawn uniformly from [first complete bin, head]. Result sizes: "
        f"mean {nb['avg_size']:.2f}, min {nb['min_size']}, max {nb['max_size']}; states "
        "(first 2,000 queries): "
        + ", ".join(f"{s} {c:,}" for s, c in sorted(nb["states"].items()))
        + f". Baseline: a raw prefix scan of the node's adjacency rows (all versions, "
        f"{nb['rows_per_scan']:.1f} rows per scan on average).",
        "",
        "| round | reader.neighbors /s | raw prefix scan /s | ratio "
        "| per CPU-s: neighbors / scan |",
        "|---|---:|---:|---:|---:|",
    ]
    for i in range(len(nb["rounds"]["neighbors"])):
        a_, b_ = nb["rounds"]["neighbors"][i], nb["rounds"]["scan"][i]
        L.append(
            f"| {i + 1} | {_n(a_)} | {_n(b_)} | {a_ / b_:.1%} | "
            f"{_n(nb['cpu']['neighbors'][i])} / {_n(nb['cpu']['scan'][i])} |"
        )
    L += [
        f"| **median** | **{_n(nb_med)}** | **{_n(scan_med)}** | **{nb_med / scan_med:.1%}** | "
        f"**{_n(nb_cpu)} / {_n(med(nb['cpu']['scan']))}** |",
        "",
    ]

    # re-projection
    same = r["digest_live"] == r["digest_fresh"]
    L += [
        "## Re-projection (audit)",
        "",
        "A child process opens the logs and runs "
        "`fold_decisions(logs, GraphState(graph), Projector(ProjectionStore(fresh, "
        "create=True), state))` over the whole decisions log.",
        "",
        "| | value |",
        "|---|---:|",
        f"| decisions | {rp['decisions']:,} |",
        f"| **re-projection** | **{rp['fold_s']:.1f} s → {_n(rp_rate)} decisions/s** |",
        f"| baseline: read + `decode_decision` only | {rp['decode_s']:.1f} s → "
        f"{_n(dec_rate)} decisions/s |",
        f"| CPU time of the folding thread | {rp['fold_cpu_s']:.1f} s → {_n(rp_cpu)} "
        "decisions per CPU-second |",
        f"| cyclic GC during the fold | {sum(rp['gc']['seconds']):.1f} s |",
        f"| peak RSS of the child (wait4) | {_mib(r['rss_reproject_kib'])} |",
        f"| rebuilt rows identical to the live projection (all families but meta) | "
        f"{'yes' if same else '**NO**'} ({sum(r['rows_live'].values()):,} rows live, "
        f"{sum(r['rows_fresh'].values()):,} rebuilt) |",
        "| rows per family (live) | "
        + ", ".join(f"{f} {c:,}" for f, c in r["rows_live"].items())
        + " |",
        "",
    ]

    # profiles
    L += [
        "## Where the time goes (cProfile)",
        "",
        "Compiled code that is not called as a builtin function (Cython functions such as "
        "fastavro's, the stdlib json C scanner/encoder) is invisible to cProfile: its time is "
        "counted as own time of the Python function that calls it. Code generated at run "
        "time and `exec`'d (e.g. compiled Avro codecs) is listed under its pseudo file name.",
        "",
        f"### Ingest ({r['profile_ingest']['n']:,} commands, separate child and directory)",
        "",
    ]
    L += _profile_tables(r["profile_ingest"], "commands")
    L += ["", "### Point reads", ""]
    L += _profile_tables(r["reads"]["profile_point"], "point reads")
    L += ["", "### Neighbors", ""]
    L += _profile_tables(r["reads"]["profile_neighbors"], "neighbors queries")
    L += [""]
    # the other benchmarks own the sections after their markers: re-running this one alone
    # keeps their last results
    write_head(path, "\n".join(L))


# -- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_ingest":
        return child_ingest(argv[1:])
    if argv and argv[0] == "_reproject":
        return child_reproject(argv[1:])

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument(
        "--out",
        type=Path,
        default=Path("BENCHMARKS.md"),
        help="Markdown report to write (default BENCHMARKS.md)",
    )
    p.add_argument("--commands", type=int, help="commands to ingest (default 1,000,000)")
    p.add_argument(
        "--quick", action="store_true", help="50,000 commands and fewer reads: a one-minute check"
    )
    p.add_argument("--keep", action="store_true", help="keep bench-data/ afterwards")
    p.add_argument("--data-dir", type=Path, default=ROOT / "bench-data")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument(
        "--chunk",
        type=int,
        default=10_000,
        help="commands per Graph.append before each Graph.process()",
    )
    p.add_argument("--reads", type=int, help="point reads per round")
    p.add_argument("--neighbor-queries", type=int, help="neighbors queries per round")
    p.add_argument("--rounds", type=int, help="interleaved read rounds")
    p.add_argument("--profile-commands", type=int, help="commands in the profiled ingest")
    p.add_argument("--profile-reads", type=int, default=50_000)
    p.add_argument("--results-json", type=Path, help="also write every measurement as JSON")
    p.add_argument("--ingest-runs", type=int, default=3, help="ingest passes (min/median/max)")
    p.add_argument("--reproject-runs", type=int, default=3, help="re-projection passes")
    a = p.parse_args(argv)
    a.commands = a.commands or (50_000 if a.quick else 1_000_000)
    a.reads = a.reads or (50_000 if a.quick else 200_000)
    a.neighbor_queries = a.neighbor_queries or (20_000 if a.quick else 100_000)
    a.rounds = a.rounds or (3 if a.quick else 5)
    a.profile_commands = min(a.commands, a.profile_commands or (20_000 if a.quick else 100_000))
    a.profile_reads = min(a.profile_reads, 20_000 if a.quick else a.profile_reads)
    if a.commands < 1000:
        p.error("--commands must be at least 1000")

    exe = (
        os.path.relpath(sys.executable) if sys.executable.startswith(str(ROOT)) else sys.executable
    )
    script = os.path.relpath(Path(__file__).resolve())
    command = shlex.join([exe, script, *argv])
    r: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commands": a.commands,
        "seed": a.seed,
        "chunk": a.chunk,
        "keep": a.keep,
        "command": command,
        "load_start": loadavg(),
        "machine": machine(),
        "versions": versions(),
        "src_start": source_digest(),
    }
    data = a.data_dir
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    graph_dir, prof_dir, fresh_dir = data / "graph", data / "profile-graph", data / "reprojected"
    try:
        # 1. workload
        phase("generate", f"generating {a.commands:,} commands into {data / 'commands.bin'}")
        wl = generate(a.commands, data / "commands.bin", a.seed, log=log)
        r["gen_s"], r["gen_bytes"] = wl.seconds, wl.encoded_bytes
        r["mix"], r["fallbacks"] = dict(wl.mix), wl.fallbacks
        log(f"generated in {wl.seconds:.1f} s ({len(wl.edges):,} edges, {len(wl.hubs):,} bins)")
        gc.collect()
        gc.freeze()  # the harness's own objects are not the system under test

        # 2. ingest (the first child of this process, so RUSAGE_CHILDREN is its peak RSS)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        phase("ingest", f"ingest: {a.commands:,} commands in a child process")
        proc = subprocess.run(
            child_cmd(
                "_ingest",
                "--data",
                str(graph_dir),
                "--commands-file",
                str(data / "commands.bin"),
                "--chunk",
                str(a.chunk),
                "--limit",
                str(a.commands),
                "--result",
                str(data / "ingest.json"),
                "--outcomes",
                str(data / "outcomes.bin"),
            ),
            cwd=ROOT,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"ingest child failed ({proc.returncode})")
        r["rss_children_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        r["rss_before_kib"] = before
        ing = json.loads((data / "ingest.json").read_text())
        r["ingest"] = ing
        log(
            f"ingest: {ing['commands'] / (ing['append_s'] + ing['process_s']):,.0f} commands/s, "
            f"peak RSS {r['rss_children_kib'] / 1024:,.0f} MiB"
        )
        if ing["decisions"] != a.commands or ing["head"] != a.commands - 1:
            raise SystemExit(
                f"expected {a.commands} decisions, got {ing['decisions']} (head {ing['head']})"
            )
        inv_legend = {c: o for o, c in ing["legend"].items()}
        codes = (data / "outcomes.bin").read_bytes()
        crosstab: dict[str, Counter[str]] = {}
        for cat_idx, code in zip(wl.categories, codes, strict=True):
            crosstab.setdefault(wl.category_names[cat_idx], Counter())[inv_legend[code]] += 1
        r["crosstab"] = crosstab
        r["disk_log"] = dir_size(graph_dir / "log")
        r["disk_projection"] = dir_size(graph_dir / "projection")
        runs = [ing]
        for k in range(1, a.ingest_runs):  # more runs of the same stream, for min/median/max
            phase(f"ingest {k + 1}", f"ingest run {k + 1}/{a.ingest_runs} in a child process")
            extra = data / f"graph-{k + 1}"
            run_child(
                child_cmd(
                    "_ingest", "--data", str(extra), "--commands-file",
                    str(data / "commands.bin"), "--chunk", str(a.chunk), "--limit",
                    str(a.commands), "--result", str(data / f"ingest-{k + 1}.json"),
                )
            )  # fmt: skip
            runs.append(json.loads((data / f"ingest-{k + 1}.json").read_text()))
            shutil.rmtree(extra, ignore_errors=True)
        r["ingest_runs"] = [
            {
                "rate": x["commands"] / (x["append_s"] + x["process_s"]),
                "append_rate": x["commands"] / x["append_s"],
            }
            for x in runs
        ]

        # 3. profiled ingest
        phase("profiled ingest", f"profiled ingest: {a.profile_commands:,} commands in a child")
        run_child(
            child_cmd(
                "_ingest",
                "--data",
                str(prof_dir),
                "--commands-file",
                str(data / "commands.bin"),
                "--chunk",
                str(a.chunk),
                "--limit",
                str(a.profile_commands),
                "--result",
                str(data / "ingest-profile.json"),
                "--profile",
                str(data / "ingest.pstats"),
            )
        )
        r["profile_ingest"] = profile_summary(pstats.Stats(str(data / "ingest.pstats")))
        r["profile_ingest"]["n"] = a.profile_commands
        shutil.rmtree(prof_dir, ignore_errors=True)

        # 4. reads
        from claimgraph.service.graph import open_graph

        phase("open + reads", "reads: open_graph (nothing is folded on open)")
        t0 = time.perf_counter()
        g = open_graph(graph_dir)
        r["open_s"] = time.perf_counter() - t0
        try:
            head = g.head()
            r["reads"] = bench_reads(g, wl, head, a, random.Random(a.seed + 1), data)
        finally:
            g.close()
        del g
        gc.collect()

        # 5. re-projection
        phase("re-projection", "re-projection in a child process")
        r["rss_reproject_kib"] = run_child(
            child_cmd(
                "_reproject",
                "--data",
                str(graph_dir),
                "--fresh",
                str(fresh_dir),
                "--result",
                str(data / "reproject.json"),
            )
        )
        r["reproject"] = json.loads((data / "reproject.json").read_text())
        rps = [r["reproject"]]
        for k in range(1, a.reproject_runs):
            phase(f"re-projection {k + 1}", f"re-projection run {k + 1}/{a.reproject_runs}")
            extra = data / f"reprojected-{k + 1}"
            run_child(
                child_cmd(
                    "_reproject", "--data", str(graph_dir), "--fresh", str(extra),
                    "--result", str(data / f"reproject-{k + 1}.json"),
                )
            )  # fmt: skip
            rps.append(json.loads((data / f"reproject-{k + 1}.json").read_text()))
            shutil.rmtree(extra, ignore_errors=True)
        r["reproject_runs"] = [
            {"rate": x["decisions"] / x["fold_s"], "decode_rate": x["decisions"] / x["decode_s"]}
            for x in rps
        ]
        log("comparing the rebuilt projection with the live one")
        r["digest_live"], r["rows_live"] = digest_rows(graph_dir / "projection")
        r["digest_fresh"], r["rows_fresh"] = digest_rows(fresh_dir)

        r["load_end"] = loadavg()
        r["phases"] = PHASES
        r["src_end"] = source_digest()
        r["git"] = git_info()
        r["wall_s"] = time.time() - _T_START
        write_report(a.out, r)
        if a.results_json is not None:
            a.results_json.write_text(json.dumps(r, indent=1, default=str) + "\n")
        log(f"wrote {a.out}")
    finally:
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
