#!/usr/bin/env python3
"""`claimgraph submit` as a user runs it, beside SQLite inserting the same claims (``make bench``).

    .venv/bin/python tools/bench_submit.py --out BENCHMARKS.md    # 100,000 claims, 3 rounds
    .venv/bin/python tools/bench_submit.py --claims 20000         # a quick look, to stdout

One JSON Lines file of new claims (``stocks`` edges of the benchmark schema in
tools/workload.py, one evidence item, a reasoning, explicit ids and times) is written once.
Each round then runs, in fresh directories and alternating:

* ``claimgraph --data D submit FILE > decisions.jsonl`` in a child process (the graph is
  created and its schema published first, not timed): durable, one decision per line out;
* a baseline child that reads the same file line by line, ``json.loads`` each line and
  inserts it into SQLite (WAL, ``synchronous=FULL``, the claim's id as primary key and two
  indexes, as a store of edges would have), committing every 2,048 rows.

Both are timed from process start to exit (wall clock), with their CPU time and peak RSS
from ``wait4``. The report gives min / median / max of the rounds and the ratio of the
medians; a profile of one smaller submit says where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from sections import write_section  # noqa: E402
from workload import SCHEMA  # noqa: E402

MARKER = "<!-- submit-benchmarks -->"
TARGET = 0.5  # claimgraph submit / SQLite, >=

SQLITE = r"""
import json, sqlite3, sys
path, db = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db, isolation_level=None)
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA synchronous=FULL")
con.execute(
    "CREATE TABLE claims (command_id TEXT PRIMARY KEY, edge_type TEXT, subject TEXT, "
    "object TEXT, polarity TEXT, agent TEXT, task TEXT, confidence REAL, evidence TEXT, "
    "reasoning TEXT, asserted_at INTEGER)"
)
con.execute("CREATE INDEX by_subject ON claims (edge_type, subject)")
con.execute("CREATE INDEX by_object ON claims (edge_type, object)")
sql = "INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
n = 0
con.execute("BEGIN")
with open(path, "rb") as f:
    for line in f:
        c = json.loads(line)
        con.execute(sql, (c["command_id"], c["edge_type"], c["subject"], c["object"],
                          c["type"], c["agent"], c["task"], c["confidence"],
                          json.dumps(c["evidence"]), c["reasoning"], c["asserted_at"]))
        n += 1
        if n % 2048 == 0:
            con.execute("COMMIT")
            con.execute("BEGIN")
con.execute("COMMIT")
con.close()
print(n)
"""


def write_claims(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for j in range(n):
            f.write(
                json.dumps(
                    {
                        "type": "assert",
                        "command_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                        "edge_type": "stocks",
                        "subject": f"bin:b{j // 10}",
                        "object": f"sku:s{j}",
                        "agent": f"scanner-{j % 7}",
                        "task": "cycle-count",
                        "confidence": round(0.6 + rng.random() * 0.4, 3),
                        "evidence": [f"scan#{j}"],
                        "reasoning": "stocks observed by a cycle count",
                        "asserted_at": 1_800_000_000_000 + 10 * j,
                    }
                )
                + "\n"
            )


def timed(cmd: list[str], stdout: Any = subprocess.DEVNULL) -> dict[str, float]:
    """Run ``cmd``; its wall time, CPU time (user + system) and peak RSS (MiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=stdout)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024}


def claimgraph_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "claimgraph", *args]


def fresh_graph(d: Path, schema: Path) -> None:
    subprocess.run(claimgraph_cmd("--data", str(d), "init", "--graph", "bench"), check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
    subprocess.run(
        claimgraph_cmd("--data", str(d), "schema", "apply", str(schema), "--agent", "bench-admin"),
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def run_submit(work: Path, claims: Path, schema: Path, n: int) -> dict[str, float]:
    d = work / "graph"
    shutil.rmtree(d, ignore_errors=True)
    fresh_graph(d, schema)
    out = work / "decisions.jsonl"
    with out.open("wb") as f:
        r = timed(claimgraph_cmd("--data", str(d), "submit", str(claims)), stdout=f)
    kinds: dict[str, int] = {}
    lines = 0
    with out.open("rb") as f:
        for line in f:
            lines += 1
            k = json.loads(line)["kind"]
            kinds[k] = kinds.get(k, 0) + 1
    if lines != n or kinds.get("accepted") != n:
        raise SystemExit(f"submit decided {lines} lines: {kinds} (expected {n} accepted)")
    shutil.rmtree(d, ignore_errors=True)
    return r


def run_sqlite(work: Path, claims: Path) -> dict[str, float]:
    db = work / "claims.sqlite"
    for p in work.glob("claims.sqlite*"):
        p.unlink()
    r = timed([sys.executable, "-c", SQLITE, str(claims), str(db)])
    for p in work.glob("claims.sqlite*"):
        p.unlink()
    return r


def profile(work: Path, claims: Path, schema: Path, n: int) -> dict[str, Any]:
    from bench import profile_summary

    part = work / "profile.jsonl"
    with claims.open("rb") as src, part.open("wb") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    d = work / "profile-graph"
    fresh_graph(d, schema)
    stats = work / "submit.pstats"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "claimgraph",
         "--data", str(d), "submit", str(part)],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    shutil.rmtree(d, ignore_errors=True)
    out = profile_summary(pstats.Stats(str(stats)), 12)
    out["n"] = n
    return out


def _mmm(v: list[float], fmt: str = "{:,.0f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(v), statistics.median(v), max(v)))


def report(a: argparse.Namespace, res: dict[str, Any]) -> str:
    n = a.claims
    cg = [n / r["wall"] for r in res["submit"]]
    sq = [n / r["wall"] for r in res["sqlite"]]
    cg_cpu = [n / r["cpu"] for r in res["submit"]]
    sq_cpu = [n / r["cpu"] for r in res["sqlite"]]
    paired = [c / s for c, s in zip(cg, sq, strict=True)]
    ratio = statistics.median(cg) / statistics.median(sq)
    verdict = "**PASS**" if ratio >= TARGET else "**FAIL**"
    L = [
        "## `claimgraph submit` beside SQLite (tools/bench_submit.py)",
        "",
        f"Generated on {res['date']}: {n:,} new claims in one JSON Lines file "
        f"({res['bytes'] / n:.0f} bytes per line), {a.rounds} rounds alternating the two in "
        "fresh directories. Each is a child process timed from start to exit: "
        "`claimgraph --data D submit FILE > decisions.jsonl` (durable: each batch of 2,048 "
        "commands and their decisions is one synced write; one JSON decision per line out) "
        "and a Python child that `json.loads` each line and inserts it into SQLite (WAL, "
        "`synchronous=FULL`, primary key on the claim id, indexes on (edge type, subject) and "
        f"(edge type, object), a commit per 2,048 rows). Load average {res['load']}.",
        "",
        "| claims/s (min / median / max) | wall clock | per CPU-second | peak RSS MiB |",
        "|---|---:|---:|---:|",
        f"| `claimgraph submit` | {_mmm(cg)} | {_mmm(cg_cpu)} | "
        f"{_mmm([r['rss'] for r in res['submit']])} |",
        f"| SQLite, same file, same run | {_mmm(sq)} | {_mmm(sq_cpu)} | "
        f"{_mmm([r['rss'] for r in res['sqlite']])} |",
        "",
        f"Ratio of the medians: **{ratio:.2f}×** SQLite (target >= {TARGET}×: {verdict}); "
        f"per round: {', '.join(f'{x:.2f}×' for x in paired)}.",
        "",
    ]
    p = res.get("profile")
    if p:
        total = p["total"] or 1.0
        L += [
            f"Where submit's time goes (cProfile of one submit of {p['n']:,} claims, "
            f"{p['total']:.1f} s profiled; shares of own time by component):",
            "",
            "| component | share |",
            "|---|---:|",
        ]
        for cat, tt in p["categories"][:10]:
            L.append(f"| {cat} | {100 * tt / total:.1f}% |")
        L += ["", "| function | calls | own s | cumulative s |", "|---|---:|---:|---:|"]
        for r in p["tottime"][:12]:
            fn = r["fn"].replace("|", "\\|")
            L.append(f"| `{fn}` | {r['ncalls']:,} | {r['tottime']:.2f} | {r['cumtime']:.2f} |")
        L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("--claims", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile-claims", type=int, default=20_000, help="0: no profile")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--out", type=Path, help="report whose submit section to (re)write")
    a = p.parse_args(argv)
    if a.rounds < 3:
        p.error("--rounds must be at least 3 (min / median / max)")
    work = Path(tempfile.mkdtemp(prefix="claimgraph-bench-submit-", dir=ROOT))
    try:
        claims, schema = work / "claims.jsonl", work / "schema.yaml"
        write_claims(claims, a.claims, a.seed)
        schema.write_text(SCHEMA, encoding="utf-8")
        res: dict[str, Any] = {"submit": [], "sqlite": [], "bytes": claims.stat().st_size}
        for r in range(a.rounds):
            order = [("submit", True), ("sqlite", False)]
            for label, is_submit in order if r % 2 == 0 else order[::-1]:
                m = (
                    run_submit(work, claims, schema, a.claims)
                    if is_submit
                    else run_sqlite(work, claims)
                )
                res[label].append(m)
                print(
                    f"round {r + 1}: {label}: {a.claims / m['wall']:,.0f} claims/s "
                    f"({m['wall']:.1f} s, CPU {m['cpu']:.1f} s, RSS {m['rss']:.0f} MiB)",
                    file=sys.stderr,
                    flush=True,
                )
        if a.profile_claims:
            res["profile"] = profile(work, claims, schema, min(a.profile_claims, a.claims))
        res["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        res["load"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        text = report(a, res)
        if a.out is None:
            print(text)
        else:
            write_section(a.out, MARKER, text)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
