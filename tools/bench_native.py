#!/usr/bin/env python3
"""The native core against the pure-Python core, same run, same commands (issue #15, steps 1-2).

    .venv/bin/python tools/bench_native.py                     # 100,000 commands, 3 runs each
    .venv/bin/python tools/bench_native.py -n 20000 --out /tmp/native.md
    make bench                                                 # its section of BENCHMARKS.md

The workload is ``make bench``'s (tools/workload.py: 90% new edges, 10% conflicting or stale).
Each run decides every command, encodes its decision and folds it, in this process, on one
core (no I/O: this is the per-command CPU the issue budgets), with

* ``python``: ``core.governor.decide`` + ``core.wire.encode_decision`` + ``GraphState.evolve``;
* ``native``: ``native.decide.decide`` (native where it covers the command) + the native
  decision encoder + ``native.decide.evolve`` (native where it covers the decision).

Runs alternate (python, native, python, ...) so load on a shared machine hits both alike;
each figure is min / median / max of the runs, in CPU seconds of this process. The native
runs must produce the same decision bytes (a SHA-256 over all of them) and the same state
digest as the Python runs, or the benchmark fails. Codec figures: decoding every command and
encoding every decision, both ways.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from sections import write_section  # noqa: E402
from workload import GRAPH, generate, read_frames  # noqa: E402

from claimgraph import native  # noqa: E402
from claimgraph.core import wire  # noqa: E402
from claimgraph.core.governor import decide as python_decide  # noqa: E402
from claimgraph.core.snapshot import state_digest  # noqa: E402
from claimgraph.core.state import GraphState  # noqa: E402
from claimgraph.errors import DecodeError  # noqa: E402
from claimgraph.logs.base import LogRecord  # noqa: E402
from claimgraph.native import batch as native_batch  # noqa: E402
from claimgraph.native import codec  # noqa: E402
from claimgraph.native import decide as native_decide  # noqa: E402
from claimgraph.projections.projector import ProjectionStore, Projector  # noqa: E402


def run(records: list[bytes], core: str) -> tuple[float, str, str]:
    """Decide, encode and fold every record: (CPU seconds, decisions digest, state digest)."""
    decide: Callable[..., Any] = python_decide if core == "python" else native_decide.decide
    encode: Callable[[Any], bytes] = (
        wire.encode_decision if core == "python" else codec.encode_decision
    )
    evolve: Callable[..., Any] = GraphState.evolve if core == "python" else native_decide.evolve
    state = GraphState(GRAPH)
    h = hashlib.sha256()
    t0 = time.process_time()
    for i, record in enumerate(records):
        d = decide(state, record, i, 1_700_000_000_000 + i)
        raw = encode(d)
        evolve(state, d, i, raw)
        h.update(raw)
    cpu = time.process_time() - t0
    return cpu, h.hexdigest(), state_digest(state)


def run_rows(records: list[bytes], core: str, where: Path) -> tuple[float, str, str, str]:
    """Also stage every decision's projection rows and write them, 2,048 commands a batch with
    ``gc.freeze()`` after each (the embedded runtime's step): ``python`` stages with
    ``Projector.stage``, ``native`` makes one :func:`claimgraph.native.batch.decide_batch`
    call per batch. (CPU seconds, decisions
    digest, state digest, rows digest.)"""
    recs = [LogRecord(i, 1_700_000_000_000 + i, r) for i, r in enumerate(records)]
    state = GraphState(GRAPH)
    store = ProjectionStore(where, create=True)
    projector = Projector(store, state)
    h = hashlib.sha256()
    t0 = time.process_time()
    for a in range(0, len(recs), 2048):
        chunk = recs[a : a + 2048]
        if core == "python":
            for rec in chunk:
                d = python_decide(state, rec.value, rec.offset, rec.timestamp)
                raw = wire.encode_decision(d)
                projector.stage(rec.offset, d, state.evolve(d, rec.offset, raw))
                h.update(raw)
        else:
            for raw in native_batch.decide_batch(state, chunk, a, projector)[1]:
                h.update(raw)
        projector.flush()
        gc.freeze()  # as the runtime does after each batch: the folded state is long-lived
    cpu = time.process_time() - t0
    gc.unfreeze()
    rows = hashlib.sha256()
    it = store.db.iter()
    it.seek_to_first()
    while it.valid():
        rows.update(bytes(it.key()) + b"\x00" + bytes(it.value()) + b"\x00")
        it.next()
    store.close()
    return cpu, h.hexdigest(), state_digest(state), rows.hexdigest()


def timed(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def stats(xs: list[float]) -> tuple[float, float, float]:
    return min(xs), statistics.median(xs), max(xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--commands", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, help="report whose native section to (re)write")
    a = ap.parse_args(argv)
    if not native.ACTIVE:
        why = "the native core is not loaded (no cargo when make install ran, or CLAIMGRAPH_PURE=1)"
        print(f"bench_native: skipped: {why}", file=sys.stderr)
        _write(a.out, f"## Native core vs pure Python\n\nSkipped: {why}.\n")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "commands.bin"
        generate(a.commands, path, log=lambda m: None)
        with path.open("rb") as f:
            records = read_frames(f, a.commands)
    n = len(records)
    times: dict[str, list[float]] = {"python": [], "native": []}
    digests: dict[str, set[tuple[str, str]]] = {"python": set(), "native": set()}
    share = folded = 0.0
    declined: dict[str, int] = {}
    for _ in range(a.runs):
        for core in ("python", "native"):
            native_decide.reset_counts()
            cpu, dd, sd = run(records, core)
            times[core].append(cpu)
            digests[core].add((dd, sd))
            if core == "native":
                share = native_decide.native_share()
                declined = dict(native_decide.DECLINED.most_common())
                folded = sum(native_decide.FOLDED.values()) / n
    same = digests["python"] == digests["native"] and len(digests["python"]) == 1
    # with the projection rows: the batch call against Projector.stage
    row_times: dict[str, list[float]] = {"python": [], "native": []}
    row_digests: dict[str, set[tuple[str, str, str]]] = {"python": set(), "native": set()}
    staged = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            for core in ("python", "native"):
                native_batch.STAGED.clear()
                cpu, dd, sd, rd = run_rows(records, core, Path(tmp) / f"{core}{i}")
                row_times[core].append(cpu)
                row_digests[core].add((dd, sd, rd))
                if core == "native":
                    staged = sum(native_batch.STAGED.values()) / n
    same_rows = row_digests["python"] == row_digests["native"] and len(row_digests["python"]) == 1
    same = same and same_rows
    # the codec alone: decode every command, encode every decision
    state = GraphState(GRAPH)
    decisions = []
    for i, record in enumerate(records):
        d = python_decide(state, record, i, 1_700_000_000_000 + i)
        state.evolve(d, i)
        decisions.append(d)
    codec_times: dict[str, dict[str, list[float]]] = {}
    for core in ("python", "native"):
        dec = wire.decode_command if core == "python" else codec.decode_command
        enc = wire.encode_decision if core == "python" else codec.encode_decision

        def decode_all(dec: Callable[[bytes], Any] = dec) -> None:
            for r in records[1:]:
                with contextlib.suppress(DecodeError):  # none in this workload
                    dec(r)

        def encode_all(enc: Callable[[Any], bytes] = enc) -> None:
            for d in decisions:
                enc(d)

        codec_times[core] = {
            "decode": [timed(decode_all) for _ in range(a.runs)],
            "encode": [timed(encode_all) for _ in range(a.runs)],
        }

    def us(xs: list[float], count: int) -> str:
        lo, mid, hi = stats(xs)
        return f"{lo / count * 1e6:.1f} / {mid / count * 1e6:.1f} / {hi / count * 1e6:.1f}"

    def rate(xs: list[float]) -> str:
        lo, mid, hi = stats(xs)
        return f"{n / hi:,.0f} / {n / mid:,.0f} / {n / lo:,.0f}"

    speed = statistics.median(times["python"]) / statistics.median(times["native"])
    lines = [
        f"## Native core vs pure Python ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{n:,} commands of tools/workload.py, decided + encoded + folded in process (no I/O),"
        f" {a.runs} runs per core alternating; CPU time of this process; min / median / max.",
        "",
        "| core | µs per command | commands/s |",
        "|---|---|---|",
        f"| python | {us(times['python'], n)} | {rate(times['python'])} |",
        f"| native | {us(times['native'], n)} | {rate(times['native'])} |",
        "",
        f"Speedup (median): **{speed:.2f}×**. Decided natively: **{share:.1%}** of commands; "
        f"declined to Python by reason: {declined}. Folded natively: **{folded:.1%}**.",
        f"Same decision bytes and state digest in every run: **{'yes' if same else 'NO'}**.",
        "",
        "With the projection rows, staged and written to RocksDB (unsynced) in batches of 2,048"
        " (the embedded runtime's step): `Projector.stage` per command against one"
        " `decide_batch` call per batch.",
        "",
        "| core | µs per command | commands/s |",
        "|---|---|---|",
        f"| python + rows | {us(row_times['python'], n)} | {rate(row_times['python'])} |",
        f"| native batch + rows | {us(row_times['native'], n)} | {rate(row_times['native'])} |",
        "",
        f"Speedup (median): **{statistics.median(row_times['python']) / statistics.median(row_times['native']):.2f}×**."  # noqa: E501
        f" Staged natively: **{staged:.1%}**. Same decisions, state digest and every row in every"
        f" run: **{'yes' if same_rows else 'NO'}**.",
        "",
        "| codec (µs per record) | python | native |",
        "|---|---|---|",
        f"| decode a command | {us(codec_times['python']['decode'], n - 1)} | "
        f"{us(codec_times['native']['decode'], n - 1)} |",
        f"| encode a decision | {us(codec_times['python']['encode'], n)} | "
        f"{us(codec_times['native']['encode'], n)} |",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    _write(a.out, report)
    return 0 if same else 1


MARKER = "<!-- native-benchmarks -->"


def _write(out: Path | None, text: str) -> None:
    """(Re)write this benchmark's section of the report, keeping every other section."""
    if out is not None:
        write_section(out, MARKER, text)


if __name__ == "__main__":
    raise SystemExit(main())
