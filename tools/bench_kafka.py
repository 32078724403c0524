"""Benchmarks of the Kafka runtime against a real single-node broker on loopback.

Measures, in one run on one broker:

* the exactly-once governor (one partition, batched transactions): commands/s, against a
  no-logic transactional copy loop (consume → produce → send offsets → commit, same
  batching and the governor's producer settings, ``txn_producer_config``) measured on the
  same commands;
* the projector on Kafka: decisions/s;

each of these in ``--rounds`` rounds (at least 3; default 3 of 100,000 commands), every round
on topics of its own (a fresh prefix, the same commands loaded), the copy loop and the
governor in alternating order, so each figure is a min / median / max and the ratio is taken
from the same run;
* latency from a command's produce to its decision being readable in a projection, p50 and
  p99, at a steady 1,000 commands/s with the governor and projector in their own processes.

Run: ``python tools/bench_kafka.py`` (``make bench`` runs it after tools/bench.py); it
replaces the Kafka section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from rocksdict import AccessType, Options, Rdict  # noqa: E402

from claimgraph.logs.kafka import KafkaConfig, KafkaLog  # noqa: E402
from claimgraph.logs.kafka_layout import (  # noqa: E402
    init_topics,
    place_graph,
    wait_for_leaders,
)
from claimgraph.projections.rows import input_key, unpack_version  # noqa: E402
from claimgraph.streams.kafka import KafkaGovernor, txn_producer_config  # noqa: E402
from claimgraph.streams.kafka_projector import KafkaProjector  # noqa: E402
from tests.conftest import SCHEMA  # noqa: E402
from tests.workload import record  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from rounds import MIN_ROUNDS, spread  # noqa: E402
from sections import write_section  # noqa: E402

MARKER = "<!-- kafka-benchmarks -->"


def _broker_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kafka_broker", ROOT / "tools" / "kafka_broker.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafka_broker"] = mod
    spec.loader.exec_module(mod)
    return mod


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _schema_record() -> bytes:
    from claimgraph.core.wire import encode_command

    return encode_command(
        {
            "type": "publish_schema",
            "command_id": "schema-1",
            "graph": "test",
            "agent": "admin",
            "task": "",
            "document": SCHEMA,
            "source": "bench",
        }
    )


def _load(cfg: KafkaConfig, n: int) -> None:
    """The schema and ``n`` commands, after the graph's place record (so n + 2 in all)."""
    log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
    log.append([_schema_record()])
    for start in range(0, n, 10_000):
        log.append([record(i) for i in range(start, min(n, start + 10_000))])
    log.close()


def copy_loop(cfg: KafkaConfig, n: int, batch: int, batch_ms: int) -> float:
    """The baseline: a transactional consume → produce → commit loop with no logic."""
    producer = Producer(
        txn_producer_config(cfg, **{"transactional.id": f"{cfg.prefix}-copy"})
    )  # the governor's producer settings
    producer.init_transactions(30)
    consumer = Consumer(
        cfg.client(
            **{
                "group.id": f"{cfg.prefix}-copy",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
    )
    consumer.assign([TopicPartition(cfg.commands_topic, 0, 0)])
    done = 0
    start = None
    while done < n + 2:
        msgs = [m for m in consumer.consume(batch, batch_ms / 1000) if m.error() is None]
        if not msgs:
            continue
        if start is None:
            start = time.perf_counter()
        producer.begin_transaction()
        for m in msgs:
            while True:
                try:
                    producer.produce(
                        f"{cfg.prefix}.copy", value=m.value(), key=m.key(), partition=0
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.send_offsets_to_transaction(
            [TopicPartition(cfg.commands_topic, 0, int(msgs[-1].offset() or 0) + 1)],
            consumer.consumer_group_metadata(),
            30,
        )
        producer.commit_transaction(60)
        done += len(msgs)
    consumer.close()
    assert start is not None
    return done / (time.perf_counter() - start)


def governor_rate(cfg: KafkaConfig, n: int, batch: int, batch_ms: int) -> float:
    marks: list[tuple[float, int]] = []

    def on_batch(gov: KafkaGovernor, k: int) -> None:
        marks.append((time.perf_counter(), k))

    gov = KafkaGovernor(cfg, 0, batch_size=batch, batch_ms=batch_ms, on_batch=on_batch)
    gov.start()
    gov.run(max_commands=n + 2)
    gov.close()
    # from the end of the first transaction to the end of the last one
    first_t, first_k = marks[0]
    last_t = marks[-1][0]
    return (sum(k for _, k in marks) - first_k) / (last_t - first_t)


def projector_rate(cfg: KafkaConfig, path: Path, n: int) -> float:
    proj = KafkaProjector(cfg, "test", path, batch_size=5000)
    proj.start()
    start = time.perf_counter()
    done = 0
    while done < n + 2:
        done += proj.step(timeout=0.5)
    rate = done / (time.perf_counter() - start)
    proj.close()
    return rate


def latency(cfg: KafkaConfig, workdir: Path, rate: int, seconds: float) -> list[float]:
    """Produce at ``rate``/s; time until each decision is readable in a projection."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [
        sys.executable,
        "-m",
        "claimgraph",
        "--bootstrap",
        cfg.bootstrap,
        "--prefix",
        cfg.prefix,
        "--graph",
        "test",
    ]
    gov = subprocess.Popen(
        [*base, "governor", "--partition", "0", "--batch-ms", "20"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    proj_dir = workdir / "latency-projection"
    proj = subprocess.Popen(
        [*base, "--data", str(proj_dir), "projector"], env=env, stderr=subprocess.DEVNULL
    )
    try:
        log = KafkaLog(cfg, cfg.commands_topic, 0, key="test")
        log.append([_schema_record()])
        while not (proj_dir / "projection" / "CURRENT").exists():
            time.sleep(0.1)
        db = Rdict(
            str(proj_dir / "projection"),
            Options(raw_mode=True),
            access_type=AccessType.secondary(str(workdir / "latency-secondary")),
        )
        time.sleep(3)  # let both processes settle
        pending: dict[int, float] = {}
        samples: list[float] = []
        total = int(rate * seconds)
        chunk = max(1, rate // 100)
        t0 = time.perf_counter()
        sent = 0
        while sent < total or pending:
            now = time.perf_counter()
            if sent < total and now - t0 >= sent / rate:
                offsets = log.append([record(10_000_000 + sent + i) for i in range(chunk)])
                acked = time.perf_counter()
                for off in offsets:
                    pending[off] = acked
                sent += chunk
            db.try_catch_up_with_primary()
            seen = time.perf_counter()
            for off in list(pending):
                raw = db.get(input_key(off))
                if raw is not None:
                    unpack_version(raw)
                    samples.append(seen - pending.pop(off))
            if time.perf_counter() - t0 > seconds + 60:
                raise RuntimeError(f"{len(pending)} decisions never became readable")
            time.sleep(0.001)
        db.close()
        log.close()
        return samples
    finally:
        for p in (gov, proj):
            p.terminate()
            p.wait(30)


def one_round(
    bootstrap: str, prefix: str, work: Path, n: int, args: Any, governor_first: bool
) -> tuple[float, float, float]:
    """(copy loop, governor, projector) rates of one round, on topics of its own."""
    cfg = KafkaConfig(bootstrap, prefix=prefix, partitions=1)
    init_topics(cfg)
    place_graph(cfg, "test")
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(cfg.client())
    topic = f"{prefix}.copy"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    wait_for_leaders(admin, [topic], 30)
    _say(f"[{prefix}] loading {n:,} commands ...")
    _load(cfg, n)
    if governor_first:
        gov = governor_rate(cfg, n, args.batch, args.batch_ms)
        copy = copy_loop(cfg, n, args.batch, args.batch_ms)
    else:
        copy = copy_loop(cfg, n, args.batch, args.batch_ms)
        gov = governor_rate(cfg, n, args.batch, args.batch_ms)
    proj = projector_rate(cfg, work / f"projection-{prefix}", n)
    _say(f"[{prefix}] copy loop {copy:,.0f}/s, governor {gov:,.0f}/s, projector {proj:,.0f}/s")
    return copy, gov, proj


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else "PASS" if ok else "**FAIL**"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        default="BENCHMARKS.md",
        help="report to update: its Kafka section is replaced or appended",
    )
    ap.add_argument("--commands", type=int, default=100_000, help="commands per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (>= 3): min / median / max")
    ap.add_argument("--quick", action="store_true", help="10,000 commands a round, 5 s of latency")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--batch-ms", type=int, default=100)
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    args = ap.parse_args()
    if args.rounds < MIN_ROUNDS:
        ap.error(f"--rounds must be at least {MIN_ROUNDS} (min / median / max)")
    n = 10_000 if args.quick else args.commands
    seconds = 5.0 if args.quick else args.latency_seconds
    kb = _broker_module()
    work = Path(
        tempfile.mkdtemp(
            prefix="bench-kafka-",
            dir=ROOT / "bench-data" if (ROOT / "bench-data").exists() else None,
        )
    )
    broker = kb.KafkaBroker(work / "broker")
    _say("starting broker ...")
    broker.start()
    try:
        copies: list[float] = []
        govs: list[float] = []
        projs: list[float] = []
        for r in range(args.rounds):
            copy, gov, proj = one_round(broker.bootstrap, f"bench{r}", work, n, args, r % 2 == 1)
            copies.append(copy)
            govs.append(gov)
            projs.append(proj)
        _say(f"latency at 1,000/s for {seconds:g}s ...")
        lcfg = KafkaConfig(broker.bootstrap, prefix="lat", partitions=1)
        init_topics(lcfg)
        place_graph(lcfg, "test")
        lat = latency(lcfg, work, 1000, seconds)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    p50, p99 = _pct(lat, 0.5) * 1000, _pct(lat, 0.99) * 1000
    gov, copy, proj = (statistics.median(x) for x in (govs, copies, projs))
    ratio = gov / copy
    ratios = [g / c for g, c in zip(govs, copies, strict=True)]
    rows = [
        (
            "governor, exactly-once, 1 partition (commands/s)",
            spread(govs),
            ">= 30,000 (median)",
            gov >= 30_000,
        ),
        (
            "no-logic transactional copy loop, same commands and batching (commands/s)",
            spread(copies),
            "baseline",
            None,
        ),
        (
            "governor / copy loop: ratio of the medians (per round: min / median / max)",
            f"{ratio:.0%} ({min(ratios):.0%} / {statistics.median(ratios):.0%} / "
            f"{max(ratios):.0%})",
            ">= 60%",
            ratio >= 0.6,
        ),
        ("projector on Kafka (decisions/s)", spread(projs), ">= 60,000 (median)", proj >= 60_000),
        ("produce → readable in projection, p50 at 1,000/s (ms)", f"{p50:.1f}", "report", True),
        ("produce → readable in projection, p99 at 1,000/s (ms)", f"{p99:.1f}", "report", True),
    ]
    lines = [
        "# claimgraph benchmarks: Kafka runtime",
        "",
        f"Generated by `tools/bench_kafka.py` on {time.strftime('%Y-%m-%d %H:%M', time.gmtime())}"
        " UTC"
        f"{' (quick run)' if args.quick else ''}; {args.rounds} rounds of {n:,} commands "
        "(tests/workload.py mix), each on topics of its own, the copy loop first in even "
        "rounds and the governor first in odd ones; figures are min / median / max of the "
        "rounds; "
        f"transactions of up to {args.batch} commands / {args.batch_ms} ms, one partition, a "
        "single KRaft broker from tools/kafka_broker.py on loopback. Machine: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        "| metric | measured (min / median / max) | target | result |",
        "|---|---:|---:|---|",
        *[f"| {m} | {v} | {t} | {_verdict(ok)} |" for m, v, t, ok in rows],
        "",
        f"Latency samples: {len(lat):,}; mean {statistics.mean(lat) * 1000:.1f} ms, max "
        f"{max(lat) * 1000:.1f} ms. The governor and projector ran as separate processes "
        "(`claimgraph governor`, `claimgraph projector`); readability is polled through a "
        "RocksDB secondary instance of the projection, as a reader process would.",
        "",
        "Command: `python tools/bench_kafka.py"
        + (" --quick" if args.quick else f" --commands {n} --rounds {args.rounds}")
        + (f" --latency-seconds {seconds:g}" if not args.quick else "")
        + "`",
        "",
    ]
    out = Path(args.out)
    write_section(out, MARKER, "\n".join(lines).replace("# claimgraph", "## claimgraph"))
    _say("\n".join(lines))


if __name__ == "__main__":
    main()
