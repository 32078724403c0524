#!/usr/bin/env python3
"""What a schema what-if costs on a large log; writes a section of a report.

    .venv/bin/python tools/bench_whatif.py --out BENCHMARKS.md          # 1,000,000 commands
    .venv/bin/python tools/bench_whatif.py --quick --out /tmp/bw.md     # 50,000, ~2 minutes

One embedded graph is built from the benchmark workload (tools/workload.py: the 1M-command
log of BENCHMARKS.md's other sections), then each round runs, each in a child process of its
own (so its CPU time and peak RSS are its own), interleaved: the what-if of the schema with
``custody-agent-2`` removed from the writers of ``custodian_of`` (its second custodians, the
log's slot conflicts, are rejected and those conflicts vanish), the what-if of the schema in
force itself (nothing changes: the replay alone), the first of those from the last 5% of the
log only (both states resumed from the checkpoint the build took there), and ``verify`` of
every command beside
them (the governor re-deciding the same log, and comparing bytes). Commands per CPU second of
the child, min / median / max over the rounds, with the median wall time and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from rounds import MIN_ROUNDS, spread  # noqa: E402
from sections import write_section  # noqa: E402

MARKER = "<!-- whatif-benchmarks -->"


def log(msg: str) -> None:
    print(f"[bench_whatif {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _schemas() -> tuple[str, str]:
    """(the schema in force, the proposal: custodian_of without custody-agent-2)."""
    from workload import SCHEMA

    proposal = SCHEMA.replace('{agent: "custody-agent-*", task: "*"}', "{agent: custody-agent-1}")
    assert proposal != SCHEMA
    return SCHEMA, proposal


# -- children ---------------------------------------------------------------------------------


def child(phase: str, a: dict[str, Any]) -> dict[str, Any]:
    path = Path(a["graph"])
    if phase == "build":
        from workload import generate, read_frames

        from claimgraph.projections.checkpoints import checkpoint_graph
        from claimgraph.service.graph import open_graph

        frames = path.parent / "commands.bin"
        generate(a["commands"], frames, log=log)
        g = open_graph(path, create=True, graph="bench")
        at = a["commands"] - a["commands"] // 20  # a checkpoint below the last 5%

        def want() -> int:
            left = at - (g.head() + 1)  # decided so far: head + 1
            return min(10_000, left) if left > 0 else 10_000

        with open(frames, "rb") as f:
            while batch := read_frames(f, want()):
                g.append(batch)
                done = g.process()
                if g.head() == at - 1:
                    checkpoint_graph(g)
                if g.head() % 100_000 < done:
                    log(f"ingested {g.head() + 1:,} of {a['commands']:,}")
        head = g.head()
        g.close()
        frames.unlink()
        return {"head": head}
    t0, c0 = time.perf_counter(), time.process_time()
    if phase == "whatif":
        from workload import ADMIN

        from claimgraph.service.whatif import Bounds
        from claimgraph.service.whatif_run import run_what_if

        doc = _schemas()[1 if a["proposal"] else 0]
        r = run_what_if(path, doc, agent=ADMIN, bounds=Bounds(start=a.get("from"), first=5))
        if r["stopped"] is not None:
            raise SystemExit(f"the what-if stopped: {r['stopped']}: {r['proposal']}")
        done = {"commands": r["commands"], "changed": r["changed"], "from": r["from"]}
    elif phase == "verify":
        from claimgraph.service.audit import verify
        from claimgraph.service.graph import open_graph

        g = open_graph(path)
        rep = verify(g)
        g.close()
        done = {"commands": rep.commands, "changed": 0, "from": 0}
    else:
        raise SystemExit(f"unknown phase {phase}")
    return {
        **done,
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - t0,
    }


def run_child(phase: str, args: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "_child", phase, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{proc.stderr[-3000:]}")
    sys.stderr.write(proc.stderr)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- main -------------------------------------------------------------------------------------

RUNS = (
    ("what-if: custody-agent-2 removed, every version", "whatif", {"proposal": True}),
    ("what-if: the schema in force (nothing changes)", "whatif", {"proposal": False}),
    ("what-if: custody-agent-2 removed, the last 5%", "whatif", {"proposal": True, "tail": 1}),
    ("verify, every command (beside)", "verify", {}),
)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "_child":
        res = child(argv[1], json.loads(argv[2]))
        res["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(res))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("--out", type=Path, help="report whose what-if section to (re)write")
    p.add_argument("--commands", type=int, help="commands (default 1,000,000)")
    p.add_argument("--quick", action="store_true", help="50,000 commands")
    p.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    p.add_argument("--data-dir", type=Path, default=ROOT / "bench-data-whatif")
    p.add_argument("--keep", action="store_true", help="keep (and reuse) the data directory")
    a = p.parse_args(argv)
    n = a.commands or (50_000 if a.quick else 1_000_000)
    data = a.data_dir
    graph = data / "g"
    built = json.loads((data / "built.json").read_text()) if (data / "built.json").exists() else {}
    if built.get("commands") != n:
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        log(f"building a graph of {n:,} commands")
        t = time.perf_counter()
        built = {**run_child("build", {"graph": str(graph), "commands": n}), "commands": n}
        built["build_s"] = time.perf_counter() - t
        (data / "built.json").write_text(json.dumps(built))
    head = int(built["head"])
    tail_from = head - (head + 1) // 20 + 1
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in RUNS}
    try:
        for r in range(a.rounds):
            for label, phase, extra in RUNS:
                args: dict[str, Any] = {"graph": str(graph), **extra}
                if extra.get("tail"):
                    args["from"] = tail_from
                res = run_child(phase, args)
                results[label].append(res)
                rate = res["commands"] / res["cpu_s"]
                log(f"round {r + 1}: {label}: {rate:,.0f} commands/s (CPU), {res['wall_s']:.1f}s")
    finally:
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    text = report(n, head, tail_from, results, a.rounds)
    if a.out is None:
        print(text)
    else:
        write_section(a.out, MARKER, text)
    return 0


def report(
    n: int, head: int, tail_from: int, results: dict[str, list[dict[str, Any]]], rounds: int
) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    from claimgraph.native import which

    lines = [
        f"## Policy what-if (tools/bench_whatif.py, {when})",
        "",
        f"One embedded graph of {n:,} commands (tools/workload.py, as in the sections above; "
        f"head v{head:,}), {which()} core. Each run is a child process of its own reading the logs "
        f"read-only (a secondary through a shadow directory), {rounds} rounds interleaved; "
        "commands decided again per CPU second of that process (min / median / max), its "
        "median wall time and peak RSS:",
        "",
        "| run | commands | decisions that differ | commands/s (CPU) | wall (s) | peak RSS (MiB) |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for label, runs in results.items():
        rates = [x["commands"] / x["cpu_s"] for x in runs]
        wall = statistics.median(x["wall_s"] for x in runs)
        rss = max(x["maxrss_mib"] for x in runs)
        lines.append(
            f"| {label} | {runs[0]['commands']:,} | {runs[0]['changed']:,} | {spread(rates)} | "
            f"{wall:.1f} | {rss:,.0f} |"
        )
    full = statistics.median(
        x["commands"] / x["cpu_s"] for x in results[RUNS[0][0]]
    )  # the rate that answers "how long on a 1M-command log"
    lines += [
        "",
        f"At the median rate a what-if over every version of a 1,000,000-command log takes "
        f"about **{1_000_000 / full:,.0f} s of CPU**"
        + ("" if n == 1_000_000 else f" (extrapolated linearly from {n:,} commands)")
        + ". It folds the decisions log into two states (logged and proposed) and decides "
        "every command in the range again, one command at a time: its memory is the folded "
        f"state twice. From v{tail_from:,} (the last 5%), both states start from the checkpoint "
        "below it (loaded twice); without one, folding the log up to the range twice is most "
        "of the time.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
