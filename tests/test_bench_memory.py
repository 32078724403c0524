"""tools/bench_memory.py on a tiny graph: it measures in real child processes and writes its
section of the report, with figures, beside the sections it does not own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from claimgraph import native
from tests.conftest import ROOT

SIZES = (2000, 4000)


def _mib(cell: str) -> list[float]:
    """A ``min / median / max`` cell as three numbers."""
    parts = [float(p.replace(",", "")) for p in cell.strip(" *").split(" / ")]
    assert len(parts) == 3, cell
    return parts


def test_memory_benchmark_writes_its_section_with_measured_figures(tmp_path: Path) -> None:
    report = tmp_path / "BENCHMARKS.md"
    other = "<!-- native-benchmarks -->\n## someone else's section\nkept\n"
    report.write_text("# head\n\n" + other, encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "bench_memory.py"),
            "--sizes",
            ",".join(str(n) for n in SIZES),
            "--runs",
            "1",
            "--data-dir",
            str(tmp_path / "data"),
            "--out",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# head\n\n" + other)  # the other parts, byte for byte
    section = text.split("<!-- memory-benchmarks -->\n", 1)[1]
    assert f"core loaded: **{native.which()}**" in section
    assert not (tmp_path / "data").exists()  # the graphs and command files are removed
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| (.*) \|$", line)
        if m:
            rows[int(m.group(1).replace(",", ""))] = (m.group(2), m.group(3), m.group(4))
    assert sorted(rows) == list(SIZES), section
    for n, (claims, edges, rest) in rows.items():
        # every command but the schema carries a claim; the few rejected ones are not kept
        assert 0.95 * n <= int(claims.replace(",", "")) < n
        assert 0.9 * n <= int(edges.replace(",", "")) < n
        cells = rest.split(" | ")
        peak, opened, ingested = _mib(cells[0]), _mib(cells[1]), _mib(cells[2])
        assert 20 < opened[1] < ingested[1] <= peak[1] + 1, (n, cells)
        assert _mib(cells[-1])[1] > 0  # RocksDB's own accounting was read
    slope = re.search(
        r"\| bytes per extra claim, [^|]+ \| ([\d,]+) B [^|]+\| <= 150 B \| (.+) \|", section
    )
    assert slope is not None, section
    assert int(slope.group(1).replace(",", "")) > 0
    assert slope.group(2) in ("**PASS**", "**FAIL**")
    assert "| peak RSS at 1,000,000 claims | not measured" in section  # not judged at 4,000
    walk = re.search(r"fold state after 2,000 commands .*\*\*([\d.,]+) MiB, ([\d,]+) B", section)
    assert walk is not None, section
    assert float(walk.group(1)) > 0 and int(walk.group(2).replace(",", "")) > 0


def test_the_spill_run_writes_a_section_of_its_own(tmp_path: Path) -> None:
    """``--spill N``: the children run with ``CLAIMGRAPH_STATE_CLAIMS=N``, the report says so,
    and it goes to its own section, leaving the in-memory run's section as it was."""
    report = tmp_path / "BENCHMARKS.md"
    mine = "<!-- memory-benchmarks -->\n## the in-memory run\nkept\n"
    report.write_text("# head\n\n" + mine, encoding="utf-8")
    cmd = [sys.executable, str(ROOT / "tools" / "bench_memory.py"), "--sizes", "2000,4000",
           "--runs", "1", "--data-dir", str(tmp_path / "data"), "--out", str(report),
           "--spill", "1000"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# head\n\n" + mine)
    section = text.split("<!-- memory-spill-benchmarks -->\n", 1)[1]
    assert "spilled beyond 1,000 claims (`CLAIMGRAPH_STATE_CLAIMS`)" in section
