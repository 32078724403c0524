#!/usr/bin/env python3
"""What the decisions hash chain costs ingest; writes a section of a report.

    .venv/bin/python tools/bench_chain.py --out BENCHMARKS.md     # 60,000 commands, 3 rounds

Ingest (governor + projector, durable, in process) of the same JSON-free workload into fresh
embedded graphs, alternately with the chain (rules revision 2 as it is) and with its hashing
taken out (the same decision bytes: ``prev_hash`` and ``command_sha256`` keep their length,
only SHA-256 is not computed) — min/median/max of the rounds, and the ratio of the medians.
The issue's bound: the chain costs under 5% of ingest.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from sections import write_section  # noqa: E402

MARKER = "<!-- chain-benchmarks -->"


def _ingest(n: int, chunk: int, chained: bool) -> tuple[float, float]:
    """(commands per CPU second of ingest, CPU seconds of hashing those logs' bytes alone)."""
    import claimgraph
    import claimgraph.core.governor as governor
    import claimgraph.core.state as state
    from tests.conftest import SCHEMA
    from tests.workload import record

    saved = (governor.command_digest, state.chain_next)
    if not chained:  # same bytes on the log, no hashing
        governor.command_digest = lambda raw: "0" * 64  # type: ignore[assignment]
        state.chain_next = lambda h, raw: h  # type: ignore[assignment]
    tmp = Path(tempfile.mkdtemp(prefix="bench-chain-"))
    try:
        g = claimgraph.open(tmp / "g", create=True, graph="test")
        g.publish_schema(SCHEMA, agent="admin", command_id="schema-1")
        records = [record(i) for i in range(n)]
        t = time.process_time()
        for i in range(0, n, chunk):
            g.submit(records[i : i + chunk])
        elapsed = time.process_time() - t
        decisions = [r.value for r in g.logs.decisions.read(0, n + 1)]
        commands = [r.value for r in g.logs.commands.read(0, n + 1)]
        g.close()
        h = state.GENESIS
        t = time.process_time()
        for d, c in zip(decisions, commands, strict=True):
            h = saved[1](h, d)
            saved[0](c)
        hashing = time.process_time() - t
        return n / elapsed, hashing
    finally:
        governor.command_digest, state.chain_next = saved
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("--commands", type=int, default=60_000)
    p.add_argument("--chunk", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, help="report whose chain section to (re)write")
    a = p.parse_args(argv)
    runs: dict[str, list[float]] = {"with the chain": [], "without hashing": []}
    hashing: list[float] = []
    for r in range(a.rounds):
        for label, chained in (("with the chain", True), ("without hashing", False)):
            rate, h = _ingest(a.commands, a.chunk, chained)
            runs[label].append(rate)
            if chained:
                hashing.append(h / (a.commands / rate))  # of the same run's ingest CPU
            print(f"round {r + 1}: {label}: {rate:,.0f} commands/s (CPU)", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in runs.items()}
    cost = 1 - med["with the chain"] / med["without hashing"]
    share = statistics.median(hashing)
    lines: list[str] = [
        "## The decisions hash chain: its cost to ingest",
        "",
        f"{a.commands:,} commands per round (tests/workload.py), submitted {a.chunk} at a time "
        f"into a fresh embedded graph, {a.rounds} rounds alternating; commands per CPU second "
        "of the ingesting process:",
        "",
        "| | min | median | max |",
        "|---|---|---|---|",
    ]
    for label, v in runs.items():
        lines.append(f"| {label} | {min(v):,.0f} | {statistics.median(v):,.0f} | {max(v):,.0f} |")
    verdict = "within" if share < 0.05 else "OVER"
    lines += [
        "",
        f"Ratio of the medians: {cost:+.1%} (a shared machine's noise dominates it). The "
        f"hashing itself — SHA-256 over every stored decision and command of a run, timed "
        f"alone — is {share:.2%} of that run's ingest CPU (median of {a.rounds}): {verdict} "
        "the 5% bound.",
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
