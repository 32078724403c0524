#!/usr/bin/env python3
"""Benchmarks of versions over time on the embedded runtime; writes a section of a report.

    .venv/bin/python tools/bench_versions.py --out BENCHMARKS.md          # 1,000,000 commands
    .venv/bin/python tools/bench_versions.py --quick --out /tmp/bv.md     # 50,000, ~1 minute

Every measured phase runs in its own child process (``_child PHASE``), so its wall time and
peak RSS (``ru_maxrss``) are its own. Phases, on one graph built from tools/workload.py:

1. ingest 95% of the stream, checkpoint, ingest the last 5% (the tail);
2. restart: build the governor/projector state by full replay (checkpoints moved aside) vs
   from the checkpoint plus the 5% tail; both end with the same state digest;
3. GC throughput and projection size on disk at several horizons (each on a RocksDB
   checkpoint copy of the projection; the baseline is the same copy fully compacted without
   GC, so compaction alone is not credited to GC);
4. read throughput of as-of point reads from 1 and 2 replica processes (RocksDB secondaries)
   at once, against the same reads in one process on the primary;
5. audit (every version), ``audit --at V`` and verify (all, and the last 5% as a range):
   wall time and peak RSS, next to the RSS of a plain restart (the folded state) to show that
   memory is bounded by the state, not by the log.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from sections import write_section  # noqa: E402

MARKER = "<!-- versions-benchmarks -->"


def log(msg: str) -> None:
    print(f"[bench_versions {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- children ---------------------------------------------------------------------------------


def child(phase: str, a: dict[str, Any]) -> dict[str, Any]:
    from claimgraph.service.graph import open_graph

    path = Path(a["graph"])
    if phase == "ingest":
        from workload import read_frames

        from claimgraph.projections.checkpoints import STATE_FILE, checkpoint_graph

        g = open_graph(path, create=True, graph="bench")
        out: dict[str, Any] = {}
        with open(a["commands_file"], "rb") as f:
            done = 0
            t0 = time.perf_counter()
            while done < a["commands"]:
                if done >= a["checkpoint_at"] and "checkpoint_s" not in out:
                    c0 = time.perf_counter()
                    info = checkpoint_graph(g)
                    out["checkpoint_s"] = time.perf_counter() - c0
                    out["checkpoint_version"] = info.version
                    out["checkpoint_bytes"] = info.bytes
                    out["state_bytes"] = (info.path / STATE_FILE).stat().st_size
                want = min(10_000, a["commands"] - done)
                if done < a["checkpoint_at"]:
                    want = min(want, a["checkpoint_at"] - done)
                batch = read_frames(f, want)
                if not batch:
                    break
                g.append(batch)
                done += g.process()
                if int(time.perf_counter() - t0) % 15 == 0 and done % 100_000 < 10_000:
                    log(f"ingest {done:,}/{a['commands']:,}")
            out["ingest_s"] = time.perf_counter() - t0
        out["head"] = g.head()
        g.close()
        out["projection_bytes"] = du(path / "projection")
        return out
    if phase == "restart":
        from claimgraph.core.snapshot import state_digest

        t0 = time.perf_counter()
        g = open_graph(path)
        rt = g.runtime
        secs = time.perf_counter() - t0
        digest = state_digest(rt.state)
        g.close()
        return {"seconds": secs, "resumed_from": rt.resumed_from, "state_digest": digest}
    if phase == "gc":
        from rocksdict import Checkpoint, Options, Rdict

        from claimgraph.logs.embedded import open_rdict
        from claimgraph.projections.retention import collect

        copy = Path(a["copy"])
        src = open_rdict(path / "projection", create=False)
        Checkpoint(src).create_checkpoint(str(copy))
        src.close()
        db = Rdict(str(copy), Options(raw_mode=True))
        t0 = time.perf_counter()
        if a["horizon"] > 0:
            scanned, deleted, _ = collect(db, a["horizon"])
        else:
            scanned, deleted = 0, 0
            db.compact_range(None, None)
        secs = time.perf_counter() - t0
        db.close()
        size = du(copy)
        shutil.rmtree(copy)
        return {"seconds": secs, "scanned": scanned, "deleted": deleted, "bytes": size}
    if phase == "reads":
        from claimgraph.service.replica import open_replica

        edges = json.loads(Path(a["edges"]).read_text())
        rng = random.Random(a["seed"])
        picks = [edges[rng.randrange(len(edges))] for _ in range(a["reads"])]
        r: Any = open_replica(path) if a["replica"] else open_graph(path)
        reader = r.reader
        start_at = a.get("start_at", 0.0)
        while time.time() < start_at:
            time.sleep(0.005)
        t0 = time.perf_counter()
        for e in picks:
            at = e[5] + rng.randrange(a["head"] - e[5] + 1)
            reader.edge(e[0], (e[1], e[2]), (e[3], e[4]), at, halt=False)
        secs = time.perf_counter() - t0
        r.close()
        return {"seconds": secs, "reads": a["reads"]}
    if phase in ("audit", "audit_at", "verify", "verify_range"):
        from claimgraph.service.audit import audit, verify

        g = open_graph(path)
        head = g.head()
        t0 = time.perf_counter()
        if phase == "audit":
            rep: Any = audit(g)
        elif phase == "audit_at":
            rep = audit(g, start=head // 2, end=head // 2)
        elif phase == "verify":
            rep = verify(g)
        else:
            rep = verify(g, start=a["from"], end=head)
        secs = time.perf_counter() - t0
        g.close()
        return {"seconds": secs, "report": rep.as_dict()}
    raise SystemExit(f"unknown phase {phase}")


def run_child(phase: str, args: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "_child", phase, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{proc.stderr[-3000:]}")
    sys.stderr.write(proc.stderr)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def spawn_reads(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "_child", "reads", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    if argv and argv[0] == "_child":
        res = child(argv[1], json.loads(argv[2]))
        res["maxrss_mib"] = maxrss_mib()
        print(json.dumps(res))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("--out", type=Path, help="report whose versions section to (re)write")
    p.add_argument("--commands", type=int, help="commands (default 1,000,000)")
    p.add_argument("--quick", action="store_true", help="50,000 commands: a one-minute check")
    p.add_argument("--reads", type=int, help="point reads per reader process")
    p.add_argument("--data-dir", type=Path, default=ROOT / "bench-data-versions")
    p.add_argument("--keep", action="store_true", help="keep the data directory")
    a = p.parse_args(argv)
    n = a.commands or (50_000 if a.quick else 1_000_000)
    reads = a.reads or (20_000 if a.quick else 100_000)
    data = a.data_dir
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    graph = data / "graph"
    t_all = time.perf_counter()
    r: dict[str, Any] = {"commands": n, "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    try:
        from workload import generate

        log(f"generating {n:,} commands")
        wl = generate(n, data / "commands.bin", log=log)
        edges = [list(e) for e in wl.edges]
        (data / "edges.json").write_text(json.dumps(edges))
        ckpt_at = n - n // 20
        log("ingest (checkpoint at 95%)")
        r["ingest"] = run_child(
            "ingest",
            {
                "graph": str(graph),
                "commands_file": str(data / "commands.bin"),
                "commands": n,
                "checkpoint_at": ckpt_at,
            },
        )
        head = r["ingest"]["head"]

        log("restart: full replay vs checkpoint + tail")
        aside = data / "checkpoints-aside"
        os.replace(graph / "checkpoints", aside)
        r["restart_full"] = run_child("restart", {"graph": str(graph)})
        os.replace(aside, graph / "checkpoints")
        r["restart_ckpt"] = run_child("restart", {"graph": str(graph)})
        if r["restart_full"]["state_digest"] != r["restart_ckpt"]["state_digest"]:
            raise SystemExit("restart from checkpoint gave another state than full replay")

        log("gc at several horizons")
        r["gc"] = {}
        for frac in (0.0, 0.25, 0.5, 0.75, 0.95):
            h = int(head * frac)
            r["gc"][str(frac)] = run_child(
                "gc", {"graph": str(graph), "copy": str(data / "gc-copy"), "horizon": h}
            ) | {"horizon": h}

        log("reads: primary in-process, 1 and 2 replica processes")
        base = {"graph": str(graph), "edges": str(data / "edges.json"), "reads": reads}
        base["head"] = head
        r["reads_primary"] = run_child("reads", base | {"replica": False, "seed": 1})
        r["reads_replicas"] = {}
        for k in (1, 2):
            start_at = time.time() + 3.0  # after every process has opened its replica
            procs = [
                spawn_reads(base | {"replica": True, "seed": i + 2, "start_at": start_at})
                for i in range(k)
            ]
            outs = [json.loads(pr.communicate()[0].strip().splitlines()[-1]) for pr in procs]
            slowest = max(o["seconds"] for o in outs)
            r["reads_replicas"][str(k)] = {
                "processes": outs,
                "aggregate_per_s": k * reads / slowest,
            }

        log("audit and verify")
        r["audit"] = run_child("audit", {"graph": str(graph)})
        r["audit_at"] = run_child("audit_at", {"graph": str(graph)})
        r["verify_range"] = run_child("verify_range", {"graph": str(graph), "from": ckpt_at})
        r["verify"] = run_child("verify", {"graph": str(graph)})
        r["wall_min"] = (time.perf_counter() - t_all) / 60
    finally:
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    text = report(r)
    if a.out is None:
        print(text)
    else:  # replace our section (up to the next marker), keep every other one
        write_section(a.out, MARKER, text)
        log(f"wrote the section to {a.out}")
    return 0


def report(r: dict[str, Any]) -> str:
    mb = 1e6
    ing, full, ck = r["ingest"], r["restart_full"], r["restart_ckpt"]
    tail = ing["head"] - ing["checkpoint_version"]
    lines = [
        "## Versions over time (tools/bench_versions.py)",
        "",
        f"Generated on {r['date']} with {r['commands']:,} commands (tools/workload.py); "
        f"wall time {r['wall_min']:.1f} min. Every phase ran in its own child process; "
        "baselines were measured in the same run on the same data.",
        "",
        "### Restart: checkpoint + tail vs full replay",
        "",
        "| | seconds | peak RSS (MiB) |",
        "|---|---:|---:|",
        f"| full replay of {ing['head'] + 1:,} decisions | {full['seconds']:.1f} | "
        f"{full['maxrss_mib']:.0f} |",
        f"| checkpoint at v{ing['checkpoint_version']:,} + tail of {tail:,} | "
        f"{ck['seconds']:.1f} | {ck['maxrss_mib']:.0f} |",
        "",
        f"Restart from the checkpoint took **{ck['seconds'] / full['seconds']:.1%}** of a full "
        f"replay ({full['seconds'] / ck['seconds']:.1f}x faster); both states have the same "
        f"digest. Creating the checkpoint took {ing['checkpoint_s']:.1f} s "
        f"({ing['checkpoint_bytes'] / mb:,.0f} MB, of which the encoded state "
        f"{ing['state_bytes'] / mb:,.0f} MB; the RocksDB part is hard links).",
        "",
        "### GC: throughput and projection size on disk",
        "",
        "| horizon | rows scanned | rows pruned | seconds | rows/s | size (MB) | vs compacted |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    base = r["gc"]["0.0"]["bytes"]
    for frac, g in r["gc"].items():
        rate = g["scanned"] / g["seconds"] if g["scanned"] else 0
        label = "none (compacted only)" if frac == "0.0" else f"{float(frac):.0%} of head"
        lines.append(
            f"| {label} (v{g['horizon']:,}) | {g['scanned']:,} | {g['deleted']:,} | "
            f"{g['seconds']:.1f} | {rate:,.0f} | {g['bytes'] / mb:,.0f} | "
            f"{g['bytes'] / base:.1%} |"
        )
    lines += [
        "",
        f"The live projection after ingest was {ing['projection_bytes'] / mb:,.0f} MB.",
        "",
        "### Reads from replicas (RocksDB secondaries in other processes)",
        "",
        "As-of point reads (`reader.edge`) of existing edges at random versions; "
        "the machine has 2 cores shared with other work.",
        "",
        "| readers | reads/s (aggregate) |",
        "|---|---:|",
    ]
    prim = r["reads_primary"]
    lines.append(f"| primary, in-process | {prim['reads'] / prim['seconds']:,.0f} |")
    for k, v in r["reads_replicas"].items():
        lines.append(f"| {k} replica process(es) | {v['aggregate_per_s']:,.0f} |")
    one, two = r["reads_replicas"]["1"], r["reads_replicas"]["2"]
    lines += [
        "",
        f"2 replicas vs 1: **{two['aggregate_per_s'] / one['aggregate_per_s']:.2f}x**.",
        "",
        "### Audit and verify at scale",
        "",
        "| | seconds | peak RSS (MiB) |",
        "|---|---:|---:|",
        f"| audit, every version | {r['audit']['seconds']:.1f} | {r['audit']['maxrss_mib']:.0f} |",
        f"| audit --at head/2 | {r['audit_at']['seconds']:.1f} | "
        f"{r['audit_at']['maxrss_mib']:.0f} |",
        f"| verify, every command | {r['verify']['seconds']:.1f} | "
        f"{r['verify']['maxrss_mib']:.0f} |",
        f"| verify --from v{r['verify_range']['report']['start']:,} (last 5%) | "
        f"{r['verify_range']['seconds']:.1f} | {r['verify_range']['maxrss_mib']:.0f} |",
        f"| baseline: a restart's folded state (full replay) | | {full['maxrss_mib']:.0f} |",
        "",
        "Memory is bounded by the folded state: the logs are read in batches, the "
        "re-projection goes to a scratch RocksDB on disk and comparisons stream.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
