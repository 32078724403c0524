#!/usr/bin/env python3
"""The writer's memory as the graph grows: peak RSS at N claims and the bytes per extra claim.

    .venv/bin/python tools/bench_memory.py                       # 1M and 5M claims, 3 runs each
    .venv/bin/python tools/bench_memory.py --quick               # 50k and 250k, ~1-2 minutes
    .venv/bin/python tools/bench_memory.py --sizes 200000,1000000 --runs 1 --out /tmp/mem.md
    make bench                                                   # its section of BENCHMARKS.md

Issue #15's targets: peak RSS at 1,000,000 claims <= 300 MiB (RocksDB's memory capped) and
<= 150 bytes per extra claim, shown at 5,000,000.

For each size N the stream is ``make bench``'s (tools/workload.py, generated once per size in
a child of its own: 90% new edges, 10% conflicting or stale; command 0 publishes the schema).
Each run is a fresh interpreter (a child process) that

1. imports claimgraph and reads its RSS (``start``);
2. ``open_graph(create=True)`` and builds the runtime (governor + projector over an empty
   log) -> RSS ``opened``, the baseline;
3. ingests the N commands as ``tools/bench.py`` does (``Graph.append`` of 10,000 encoded
   commands, then ``Graph.process()``; synced writes) -> RSS ``ingested``, RocksDB's own
   accounting (memtables, block cache, table readers) and the fold state's sizes;
4. closes the graph (RocksDB's memory goes), trims the C heap (``malloc_trim``) -> RSS
   ``closed``: the interpreter and the fold state, still referenced;
5. drops the graph and its state (``gc.unfreeze()``, ``gc.collect()``, ``malloc_trim``) ->
   RSS ``dropped``. ``closed - dropped`` is what the fold state held and gave back: a lower
   bound on its share (CPython frees an allocator arena only when every object in it is
   gone). ``closed - opened`` is the state with the heap around it, RocksDB gone.

The child's peak RSS is the parent's ``os.wait4`` of it (``ru_maxrss``). Slope: (median peak
RSS at the largest N - at the smallest N) / (difference in N), the same from the RSS after
the ingest, and per run pair. RocksDB is measured with the product's bounds, which are not
user settings: ``claimgraph/logs/rocks.py``'s shared block cache (``BLOCK_CACHE``) and
``MEMTABLES`` write buffers of ``WRITE_BUFFER`` bytes per database, read from that module at
run time and printed in the report.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from rounds import spread  # noqa: E402
from sections import write_section  # noqa: E402

TARGET_RSS_MIB = 300.0  # peak RSS at TARGET_AT claims, <=
TARGET_AT = 1_000_000
TARGET_SLOPE = 150.0  # bytes per extra claim, <=
MARKER = "<!-- memory-benchmarks -->"
SPILL_MARKER = "<!-- memory-spill-benchmarks -->"  # the same, with --spill

_T0 = time.time()


def log(msg: str) -> None:
    el = time.time() - float(os.environ.get("CLAIMGRAPH_BENCH_T0", _T0))
    print(f"[memory {int(el) // 60:02d}:{int(el) % 60:02d}] {msg}", file=sys.stderr, flush=True)


def rss_kib() -> int:
    """This process's resident set size now (KiB), from /proc/self/status."""
    for ln in Path("/proc/self/status").read_text().splitlines():
        if ln.startswith("VmRSS:"):
            return int(ln.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def trim() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    libc.malloc_trim(0)
    return True


def rocksdb_memory(db: Any) -> dict[str, int]:
    """RocksDB's own accounting for one open database, bytes."""
    out = {}
    for prop in ("cur-size-all-mem-tables", "block-cache-usage", "estimate-table-readers-mem"):
        out[prop] = int(db.property_int_value(f"rocksdb.{prop}"))
    return out


def _size(x: Any) -> int | None:
    try:
        return len(x)
    except TypeError:
        return None


def deep_sizes(state: Any) -> list[tuple[str, int, int]]:
    """(attribute, bytes, objects) of the Python objects reachable from each of the state's
    attributes (``sys.getsizeof``), each object counted once, at the first attribute (in
    declaration order) that reaches it; classes, modules and functions are not counted."""
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen = {id(state)}
    out = []
    for name, value in vars(state).items():
        size = count = 0
        stack = [value]
        while stack:
            o = stack.pop()
            if id(o) in seen or isinstance(o, skip):
                continue
            seen.add(id(o))
            size += sys.getsizeof(o)
            count += 1
            stack.extend(gc.get_referents(o))
        out.append((name, size, count))
    return out


# -- children --------------------------------------------------------------------------------


def child_generate(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bench_memory.py _generate")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--path", type=Path, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--result", type=Path, required=True)
    a = p.parse_args(argv)
    from workload import generate

    wl = generate(a.n, a.path, a.seed, log=log)
    a.result.write_text(
        json.dumps(
            {
                "seconds": wl.seconds,
                "bytes": wl.encoded_bytes,
                "mix": dict(wl.mix),
                "fallbacks": wl.fallbacks,
            }
        )
    )
    return 0


def child_ingest(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bench_memory.py _ingest")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--commands-file", type=Path, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--chunk", type=int, required=True)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--breakdown", action="store_true", help="walk the state (not a measured run)")
    a = p.parse_args(argv)

    from workload import GRAPH, read_frames

    from claimgraph import native
    from claimgraph.logs import rocks
    from claimgraph.service.graph import open_graph

    rss = {"start": rss_kib()}
    g = open_graph(a.data, create=True, graph=GRAPH)
    state = g.runtime.state  # the governor's fold state (built over the empty log now)
    rss["opened"] = rss_kib()
    done = 0
    batch: list[bytes] = []
    t0 = last = time.perf_counter()
    with a.commands_file.open("rb") as f:
        while done < a.n:
            batch = read_frames(f, min(a.chunk, a.n - done))
            if not batch:
                break
            g.append(batch)
            decided = g.process()
            if decided != len(batch):
                raise SystemExit(f"process() decided {decided} commands, expected {len(batch)}")
            done += decided
            now = time.perf_counter()
            if now - last >= 10.0:
                last = now
                log(
                    f"{a.n:,}: {done:,} commands ({done / (now - t0):,.0f}/s), "
                    f"RSS {rss_kib() / 1024:,.0f} MiB"
                )
    wall = time.perf_counter() - t0
    rss["ingested"] = rss_kib()
    rocksdb = {"log": rocksdb_memory(g.logs.db), "projection": rocksdb_memory(g.projection.db)}
    facts = {
        "core": native.which(),
        "head": g.head(),
        "decisions": g.logs.decisions.end(),
        "claims": _size(getattr(state, "claims", None)),
        "edges": _size(getattr(state, "edges", None)),
        "state_class": f"{type(state).__module__}.{type(state).__qualname__}",
        "claims_class": type(getattr(state, "claims", None)).__name__,
    }
    caps = {
        "block_cache": rocks.BLOCK_CACHE,
        "write_buffer": rocks.WRITE_BUFFER,
        "memtables": rocks.MEMTABLES,
    }
    breakdown = deep_sizes(state) if a.breakdown else None
    # the last chunk's records were allocated among the state's objects: left alive, they
    # would pin the heap pages the state frees below
    del batch
    g.close()
    trimmed = trim()
    rss["closed"] = rss_kib()
    del g, state
    gc.unfreeze()  # the runtime froze every batch out of the collector; let it go now
    gc.collect()
    trim()
    rss["dropped"] = rss_kib()
    a.result.write_text(
        json.dumps(
            {
                "n": done,
                "wall_s": wall,
                "rss_kib": rss,
                "rocksdb": rocksdb,
                "caps": caps,
                "facts": facts,
                "trimmed": trimmed,
                "breakdown": breakdown,
            }
        )
    )
    return 0


def _child(mode: str, *args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), mode, *args]


def run_child(cmd: list[str]) -> int:
    """Run a child to its end; return its own peak RSS (KiB) from wait4."""
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, ru = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise SystemExit(f"child failed ({code}): {shlex.join(cmd)}")
    return int(ru.ru_maxrss)


# -- report ----------------------------------------------------------------------------------


def _mib(kib: float) -> str:
    return f"{kib / 1024:,.1f}"


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def report(r: dict[str, Any]) -> str:
    sizes: list[int] = r["sizes"]
    runs: dict[int, list[dict[str, Any]]] = {n: r["runs"][str(n)] for n in sizes}
    first = runs[sizes[0]][0]
    caps, facts = first["caps"], first["facts"]
    med = statistics.median

    def col(n: int, key: str) -> list[float]:
        return [float(x["rss_kib"][key]) for x in runs[n]]

    def peak(n: int) -> list[float]:
        return [float(x["peak_kib"]) for x in runs[n]]

    lo, hi = sizes[0], sizes[-1]
    dn = hi - lo
    slope_peak = (med(peak(hi)) - med(peak(lo))) * 1024 / dn
    slope_ing = (med(col(hi, "ingested")) - med(col(lo, "ingested"))) * 1024 / dn
    pairs = [
        (b["peak_kib"] - a["peak_kib"]) * 1024 / dn for a, b in zip(runs[lo], runs[hi], strict=True)
    ]
    held = {n: [x["rss_kib"]["closed"] - x["rss_kib"]["dropped"] for x in runs[n]] for n in sizes}
    slope_held = (med(held[hi]) - med(held[lo])) * 1024 / dn
    slope_closed = (med(col(hi, "closed")) - med(col(lo, "closed"))) * 1024 / dn
    k = len(runs[lo])
    L = [
        "## Memory: peak RSS as the graph grows"
        + (
            f", the fold state spilled beyond {r['spill']:,} claims (`CLAIMGRAPH_STATE_CLAIMS`)"
            if r.get("spill")
            else ""
        )
        + f" (tools/bench_memory.py, {r['date']})",
        "",
        f"`{r['command']}` at {r['git']}; core loaded: **{facts['core']}** "
        f"(fold state `{facts['state_class']}`, claims in a `{facts['claims_class']}`); "
        f"load average {r['load_start']} → {r['load_end']}.",
        "",
        "Each run is a fresh child process that opens an empty embedded graph, ingests the first "
        "N commands of tools/workload.py (generated per size, seed "
        f"{r['seed']}: 90% new edges, 10% conflicting or stale; command 0 publishes the schema) "
        f"with `Graph.append` + `Graph.process()` per {r['chunk']:,} commands (synced), then "
        "closes it. Peak RSS is the parent's `wait4` of the child. RocksDB runs with the "
        "product's bounds (`claimgraph/logs/rocks.py`, not user settings): one shared "
        f"{caps['block_cache'] / 2**20:,.0f} MiB block cache and {caps['memtables']} write "
        f"buffers of {caps['write_buffer'] / 2**20:,.0f} MiB per database, two databases "
        "(log, projection): at most "
        f"{(caps['block_cache'] + 2 * caps['memtables'] * caps['write_buffer']) / 2**20:,.0f}"
        " MiB of cache and memtables, plus table readers (index and filter blocks).",
        "",
        f"MiB, min / median / max of {k} run{'s' if k != 1 else ''} per size:",
        "",
        "| commands | claims in state | edges in state | peak RSS | after open (baseline) "
        "| after ingest | ingest − open | RocksDB closed, heap trimmed | given back by the state ¹ "
        "| RocksDB after ingest ² |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        x = runs[n]
        f = x[0]["facts"]
        grow = [a["rss_kib"]["ingested"] - a["rss_kib"]["opened"] for a in x]
        rdb = [sum(sum(db.values()) for db in a["rocksdb"].values()) / 1024 for a in x]

        def s(v: list[float]) -> str:
            return spread([float(y) / 1024 for y in v], 1)

        claims = "n/a" if f["claims"] is None else f"{f['claims']:,}"
        edges = "n/a" if f["edges"] is None else f"{f['edges']:,}"
        L.append(
            f"| {n:,} | {claims} | {edges} | **{s(peak(n))}** | {s(col(n, 'opened'))} "
            f"| {s(col(n, 'ingested'))} | {s(grow)} | {s(col(n, 'closed'))} | {s(held[n])} "
            f"| {s(rdb)} |"
        )
    at = runs.get(TARGET_AT)
    if at is not None:
        p1 = med(peak(TARGET_AT)) / 1024
        rss_row = (
            f"| peak RSS at {TARGET_AT:,} claims | {p1:,.1f} MiB | <= {TARGET_RSS_MIB:.0f} MiB "
            f"| {_verdict(p1 <= TARGET_RSS_MIB)} |"
        )
    else:
        rss_row = (
            f"| peak RSS at {TARGET_AT:,} claims | not measured (sizes "
            f"{', '.join(f'{n:,}' for n in sizes)}) | <= {TARGET_RSS_MIB:.0f} MiB | not judged |"
        )
    L += [
        "",
        "¹ RSS with the graph closed and the C heap trimmed, minus RSS after the graph and its "
        "fold state were dropped (`gc.collect()`, `malloc_trim`): what the state gave back, a "
        "lower bound on what it held: CPython's allocator returns an arena (1 MiB on 3.11) only "
        "once every object in it is gone, so a few survivors keep whole arenas resident. "
        "² memtables + block cache + table readers, both databases, from RocksDB's properties.",
        "",
        "| target (issue #15) | measured | target | result |",
        "|---|---:|---:|---|",
        rss_row,
        f"| bytes per extra claim, peak RSS {lo:,} → {hi:,} | {slope_peak:,.0f} B "
        f"(run pairs {spread(pairs)}) | <= {TARGET_SLOPE:.0f} B "
        f"| {_verdict(slope_peak <= TARGET_SLOPE)} |",
        "",
        f"The same slope from the RSS right after the ingest: {slope_ing:,.0f} B per claim; "
        f"with RocksDB closed (the fold state and the heap around it): {slope_closed:,.0f} B; "
        f"from what the fold state gave back when dropped: {slope_held:,.0f} B. Ingest "
        "rate per size (commands/s, min / median / max): "
        + "; ".join(f"{n:,}: {spread([n / float(x['wall_s']) for x in runs[n]])}" for n in sizes)
        + ".",
        "",
    ]
    b = r.get("breakdown")
    if b is not None:
        nb = int(b["n"])
        parts = sorted(b["breakdown"], key=lambda x: -x[1])
        total = sum(x[1] for x in parts)
        objs = sum(x[2] for x in parts)
        rest = sum(x[1] for x in parts[6:])
        rss_state = med(
            [x["rss_kib"]["closed"] - x["rss_kib"]["opened"] for x in runs.get(nb, [b])]
        )
        L += [
            f"Python objects reachable from the fold state after {nb:,} commands (one more "
            "child, not a measured run; `sys.getsizeof`, each object counted once, at the first "
            f"attribute that reaches it): **{total / 2**20:,.1f} MiB, {total / nb:,.0f} B and "
            f"{objs / nb:,.1f} objects per command**, against {rss_state / 1024:,.1f} MiB of RSS "
            "grown with RocksDB closed. By attribute, bytes / objects per command: "
            + ", ".join(f"`{a}` {sz / nb:,.0f} / {c / nb:,.1f}" for a, sz, c in parts[:6])
            + f", the rest {rest / nb:,.0f} B.",
            "",
        ]
    return "\n".join(L)


# -- main ------------------------------------------------------------------------------------


def _git() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "claimgraph", "native"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return rev + (" (uncommitted changes under claimgraph/ or native/)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_generate":
        return child_generate(argv[1:])
    if argv and argv[0] == "_ingest":
        return child_ingest(argv[1:])
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sizes", help="comma-separated claim counts (default 1000000,5000000)")
    ap.add_argument("--quick", action="store_true", help="sizes 50,000 and 250,000")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (min / median / max)")
    ap.add_argument("--chunk", type=int, default=10_000, help="commands per append + process")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--data-dir", type=Path, default=ROOT / "bench-data" / "memory")
    ap.add_argument("--results-json", type=Path, help="also write every measurement as JSON")
    ap.add_argument("--out", type=Path, help="report whose memory section to (re)write")
    ap.add_argument(
        "--report-from", type=Path, help="write the report from a --results-json; measure nothing"
    )
    ap.add_argument(
        "--spill",
        type=int,
        help="run the children with CLAIMGRAPH_STATE_CLAIMS=N (the native tables keep ~N claims "
        "in memory, the rest in their spill); reported in a section of its own",
    )
    a = ap.parse_args(argv)
    if a.report_from is not None:
        return _finish(json.loads(a.report_from.read_text()), a)
    spec = a.sizes or ("50000,250000" if a.quick else "1000000,5000000")
    try:
        sizes = sorted({int(s.replace("_", "")) for s in spec.split(",") if s.strip()})
    except ValueError:
        ap.error(f"--sizes {spec!r}: comma-separated whole numbers")
    if len(sizes) < 2 or sizes[0] < 1000:
        ap.error("--sizes needs at least two distinct sizes of at least 1,000 claims")
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    if a.spill is not None and a.spill < 1:
        ap.error("--spill must be at least 1")
    os.environ.setdefault("CLAIMGRAPH_BENCH_T0", repr(_T0))
    if a.spill is not None:
        os.environ["CLAIMGRAPH_STATE_CLAIMS"] = str(a.spill)  # the children inherit it
    spill = os.environ.get("CLAIMGRAPH_STATE_CLAIMS") or None
    r: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": shlex.join(["tools/bench_memory.py", *argv]),
        "git": _git(),
        "seed": a.seed,
        "chunk": a.chunk,
        "sizes": sizes,
        "load_start": _loadavg(),
        "spill": int(spill) if spill else None,
        "runs": {},
        "workloads": {},
    }
    data: Path = a.data_dir
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    try:
        for n in sizes:
            log(f"generating {n:,} commands")
            res = data / f"workload-{n}.json"
            run_child(
                _child(
                    "_generate", "--n", str(n), "--path", str(data / f"commands-{n}.bin"),
                    "--seed", str(a.seed), "--result", str(res),
                )
            )  # fmt: skip
            r["workloads"][str(n)] = json.loads(res.read_text())
        for k in range(a.runs):  # sizes alternate, so load on the machine hits each alike
            for n in sizes:
                log(f"run {k + 1}/{a.runs}: ingesting {n:,} commands in a fresh child")
                where = data / f"graph-{n}-{k}"
                res = data / f"ingest-{n}-{k}.json"
                peak = run_child(
                    _child(
                        "_ingest", "--data", str(where), "--commands-file",
                        str(data / f"commands-{n}.bin"), "--n", str(n), "--chunk",
                        str(a.chunk), "--result", str(res),
                    )
                )  # fmt: skip
                x = json.loads(res.read_text())
                if x["n"] != n or x["facts"]["decisions"] != n or x["facts"]["head"] != n - 1:
                    raise SystemExit(
                        f"expected {n:,} decisions, got {x['facts']['decisions']:,} "
                        f"(head {x['facts']['head']:,}, {x['n']:,} ingested)"
                    )
                x["peak_kib"] = peak
                r["runs"].setdefault(str(n), []).append(x)
                log(
                    f"{n:,}: peak RSS {peak / 1024:,.1f} MiB (opened "
                    f"{x['rss_kib']['opened'] / 1024:,.1f}, ingested "
                    f"{x['rss_kib']['ingested'] / 1024:,.1f}), {n / x['wall_s']:,.0f} commands/s"
                )
                shutil.rmtree(where, ignore_errors=True)
        n = sizes[0]
        log(f"breakdown: {n:,} commands in one more child, then a walk of the fold state")
        res = data / "breakdown.json"
        run_child(
            _child(
                "_ingest", "--data", str(data / "graph-breakdown"), "--commands-file",
                str(data / f"commands-{n}.bin"), "--n", str(n), "--chunk", str(a.chunk),
                "--result", str(res), "--breakdown",
            )
        )  # fmt: skip
        r["breakdown"] = json.loads(res.read_text())
    finally:
        shutil.rmtree(data, ignore_errors=True)
    r["load_end"] = _loadavg()
    if a.results_json is not None:
        a.results_json.write_text(json.dumps(r, indent=1) + "\n")
    return _finish(r, a)


def _finish(r: dict[str, Any], a: argparse.Namespace) -> int:
    text = report(r)
    print(text)
    if a.out is not None:
        if r.get("spill"):
            write_section(a.out, SPILL_MARKER, text)
        else:
            write_section(a.out, MARKER, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
