"""CLI commands of the Kafka runtime: ``kafka init|place|status``, ``governor``, ``projector``."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.common import CTX, HelpGroup, emit, say
from claimgraph.errors import ConfigError

__all__ = ["audit_kafka", "kafka_app", "register", "verify_kafka"]

kafka_app = typer.Typer(
    cls=HelpGroup, help="Topics and status of the Kafka runtime.", no_args_is_help=True
)


@kafka_app.command("init")
def kafka_init(
    partitions: Annotated[
        int, typer.Option(help="Partitions of each partitioned topic (more grows them).")
    ] = 4,
    replication: Annotated[int, typer.Option(help="Replication factor.")] = 1,
) -> None:
    """Create the topics, or check the ones that exist (fails naming each wrong setting)."""
    from claimgraph.logs.kafka import KafkaConfig
    from claimgraph.logs.kafka_layout import init_topics

    base = CTX.kafka()
    cfg = KafkaConfig(
        base.bootstrap,
        prefix=base.prefix,
        partitions=partitions,
        replication=replication,
        extra=base.extra,
        operator=base.operator,
    )
    for line in init_topics(cfg):
        say(line)


@kafka_app.command("place")
def kafka_place(
    partition: Annotated[
        int | None,
        typer.Option(
            help="Commands partition to place the --graph on (default: where claimgraph put "
            "it before placement, crc32 of its name over the partitions of the first init)."
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Who places it (recorded in the log; default: --operator, the only agent "
            "whose place governors accept)."
        ),
    ] = None,
) -> None:
    """Place the --graph on one partition, once: writers then produce only there."""
    from claimgraph.logs.kafka_layout import place_graph

    ctx = CTX
    cfg = ctx.kafka()
    placed = place_graph(cfg, ctx.graph, partition, agent)
    if placed.offset is None:
        say(f"graph {ctx.graph!r} is placed on partition {placed.partition} already")
    else:
        say(
            f"placed graph {ctx.graph!r} on partition {placed.partition} (place record at "
            f"{cfg.commands_topic}[{placed.partition}]@{placed.offset}; the partition's "
            f"governor: claimgraph governor --partition {placed.partition})"
        )


@kafka_app.command("acls")
def kafka_acls(
    role: Annotated[
        str,
        typer.Option(
            help="operator, governor, projector, writer or agent (signs its own commands)."
        ),
    ],
    principal: Annotated[
        str, typer.Option(help="The Kafka principal the process authenticates as: User:NAME.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the grants as JSON.")] = False,
) -> None:
    """Print the kafka-acls.sh commands that grant a role exactly what it needs (offline)."""
    from claimgraph.logs.kafka_acls import grants, kafka_acls_commands

    ctx = CTX
    try:
        found = grants(role, ctx.prefix)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if as_json:
        emit(
            [
                {
                    "resource": g.resource,
                    "name": g.name,
                    "pattern": g.pattern,
                    "operations": list(g.operations),
                    "principal": principal,
                    "why": g.why,
                }
                for g in found
            ]
        )
        return
    for line in kafka_acls_commands(principal, role, ctx.prefix, ctx.bootstrap or "BOOTSTRAP"):
        say(line)


@kafka_app.command("status")
def kafka_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Each partition's head, governor lag and live governor, and each graph's placement as
    the log confirms it (placed by the operator, before rules revision 6, or refused)."""
    from claimgraph.logs.kafka import topic_partitions
    from claimgraph.logs.kafka_layout import check_layout
    from claimgraph.streams.kafka import live_governors

    ctx = CTX
    cfg = ctx.kafka()
    registry = check_layout(cfg)
    parts = topic_partitions(cfg, cfg.commands_topic)
    decision_parts = topic_partitions(cfg, cfg.decisions_topic)
    alive = live_governors(cfg, range(parts))
    rows = [_partition_row(cfg, p, p < decision_parts, alive[p]) for p in range(parts)]
    graphs = {g: _placement_row(cfg, g, registry) for g in sorted(registry.placements)}
    graph_partition = registry.placements.get(ctx.graph)
    problems = []
    if decision_parts != parts:
        problems.append(
            f"{cfg.commands_topic} has {parts} partitions and {cfg.decisions_topic} "
            f"{decision_parts}: the layout is half grown (claimgraph kafka init --partitions "
            f"{max(parts, decision_parts)} finishes it)"
        )
    if as_json:
        emit(
            {
                "bootstrap": cfg.bootstrap,
                "prefix": cfg.prefix,
                "operator": cfg.operator,
                "graph": ctx.graph,
                "graph_partition": graph_partition,
                "placements": registry.placements,
                "graphs": graphs,
                "partitions": rows,
                "problems": problems,
            }
        )
        return
    where = "not placed" if graph_partition is None else f"on partition {graph_partition}"
    say(
        f"{cfg.bootstrap} prefix {cfg.prefix}: graph {ctx.graph!r} is {where}; "
        f"{len(registry.placements)} graph(s) placed (operator {cfg.operator!r})"
    )
    for problem in problems:
        say(f"  problem: {problem}")
    for r in rows:
        if r["governors_alive"]:
            owner = f"governor {', '.join(r['governors_alive'])} (alive)"
        elif r["last_committed_by"]:
            owner = f"no governor running (last: {r['last_committed_by']})"
        else:
            owner = "no governor running"
        dec = (
            "no decisions partition"
            if r["decisions_end"] is None
            else (f"decisions end {r['decisions_end']}")
        )
        say(
            f"  p{r['partition']}: {dec}, commands "
            f"{r['decided_up_to']}/{r['commands_end']} decided (lag {r['lag']}), {owner}"
        )
    for g, row in graphs.items():
        say(f"  graph {g!r} → p{row['partition']}: {row['status']} ({row['detail']})")


def _partition_row(cfg: Any, p: int, has_decisions: bool, alive: list[str]) -> dict[str, Any]:
    """One commands partition's ends, decided position and governors (its decisions partition
    may be missing while a grow is half done: reported, never an error)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        cfg.client(**{"group.id": f"{cfg.prefix}-governor-p{p}", "enable.auto.commit": False})
    )
    try:
        _, cmd_end = c.get_watermark_offsets(
            TopicPartition(cfg.commands_topic, p), timeout=10, cached=False
        )
        dec_end = None
        if has_decisions:
            _, dec_end = c.get_watermark_offsets(
                TopicPartition(cfg.decisions_topic, p), timeout=10, cached=False
            )
        committed = c.committed([TopicPartition(cfg.commands_topic, p)], timeout=10)[0]
    finally:
        c.close()
    position = committed.offset if committed.offset >= 0 else 0
    return {
        "partition": p,
        "commands_end": cmd_end,
        "decided_up_to": position,
        "lag": max(0, cmd_end - position),
        "decisions_end": dec_end,
        # a governor alive now (in its presence group), else none: never a dead one
        "governor_owner": alive[0] if alive else None,
        "governors_alive": alive,
        "last_committed_by": committed.metadata or None,
    }


def _placement_row(cfg: Any, graph: str, registry: Any) -> dict[str, Any]:
    """A graph's registry record as the log confirms it: ``operator`` (an accepted place by
    the operator under rules revision 6), ``unconfirmed`` (accepted before revision 6, when
    the governor did not check who placed: re-confirm it), ``pending`` (not decided yet) or
    ``refused`` (writers and readers stop on it)."""
    from claimgraph.errors import IntegrityError, StorageError
    from claimgraph.logs.kafka_layout import verified_placement

    p = registry.placements[graph]
    row: dict[str, Any] = {"partition": p, "place_offset": registry.place_offsets.get(graph)}
    try:
        _, d = verified_placement(cfg, graph, registry)
    except StorageError as exc:
        return {**row, "status": "pending", "detail": str(exc)}
    except IntegrityError as exc:
        return {**row, "status": "refused", "detail": str(exc)}
    if d["rules"] < 6:
        how = (
            f"placed under rules revision {d['rules']}, before only the operator could place: "
            "re-confirm it: claimgraph rules upgrade --to 6 --agent ADMIN, then "
            "claimgraph kafka place"
        )
        return {**row, "status": "unconfirmed", "detail": how}
    return {**row, "status": "operator", "detail": f"placed by {d['agent']!r}"}


def governor(
    partition: Annotated[
        int | None,
        typer.Option(help="Commands partition to govern (default: the --graph's partition)."),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Commands per transaction (at most).")] = 1000,
    batch_ms: Annotated[int, typer.Option(help="Longest wait to fill a batch (ms).")] = 100,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus metrics on PORT.")
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="Address of the metrics server (0.0.0.0 in containers).")
    ] = "127.0.0.1",
    checkpoints: Annotated[
        Path | None,
        typer.Option(help="Directory of state snapshots: restart folds only the tail after one."),
    ] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option(help="Snapshot after every N decided commands.")
    ] = None,
    upgrade_oversized: Annotated[
        list[str] | None,
        typer.Option(
            help="A rules-revision-1 GRAPH whose command's decision is too large for the "
            "decisions topic: decide it under the newest revision (rejected too_large), which "
            "the graph keeps from there on. The governor names the graph when it stops."
        ),
    ] = None,
) -> None:
    """Run the exactly-once governor for one partition of the commands topic."""
    from claimgraph.logs.kafka_layout import placement
    from claimgraph.streams.kafka import KafkaGovernor
    from claimgraph.streams.metrics import GovernorMetrics

    ctx = CTX
    cfg = ctx.kafka()
    if partition is None:
        partition = placement(cfg, ctx.graph)
    metrics = GovernorMetrics(metrics_port, partition, metrics_host)
    if checkpoint_every is not None and checkpoints is None:
        raise ConfigError("--checkpoint-every needs --checkpoints DIR")
    gov = KafkaGovernor(
        cfg,
        partition,
        batch_size=batch_size,
        batch_ms=batch_ms,
        on_batch=metrics.update,
        checkpoints=checkpoints,
        checkpoint_every=checkpoint_every,
        upgrade_oversized=frozenset(upgrade_oversized or ()),
    )
    metrics.watch(gov)
    signal.signal(signal.SIGTERM, lambda *_: gov.stop())
    try:
        gov.run()
    except KeyboardInterrupt:
        pass
    finally:
        metrics.close()
        gov.close()


def projector(
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus metrics on PORT.")
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="Address of the metrics server (0.0.0.0 in containers).")
    ] = "127.0.0.1",
    checkpoint_every: Annotated[
        int | None,
        typer.Option(help="Checkpoint into DIR/checkpoints after every N projected decisions."),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            help="Consumer group its position is committed to, for Kafka's lag tools "
            "(default PREFIX-projector-GRAPH; give each projector of a graph its own)."
        ),
    ] = None,
) -> None:
    """Project the --graph from Kafka into the --data directory (versioned RocksDB); restarts
    from the newest checkpoint in DIR/checkpoints plus the partition's tail."""
    from claimgraph.streams.kafka_projector import KafkaProjector
    from claimgraph.streams.metrics import ProjectorMetrics

    ctx = CTX
    proj = KafkaProjector(ctx.kafka(), ctx.graph, Path(ctx.data), group=group)
    metrics = ProjectorMetrics(metrics_port, ctx.graph, metrics_host)
    metrics.watch(proj)
    signal.signal(signal.SIGTERM, lambda *_: proj.stop())
    try:
        proj.run(on_batch=metrics.update, checkpoint_every=checkpoint_every)
    except KeyboardInterrupt:
        pass
    finally:
        metrics.close()
        proj.close()


def verify_kafka(as_json: bool) -> None:
    """Re-run the governor over the --graph's commands partition."""
    from claimgraph.logs.kafka_layout import verified_placement
    from claimgraph.streams.kafka import verify_partition

    ctx = CTX
    cfg = ctx.kafka()
    p, _ = verified_placement(cfg, ctx.graph)  # the partition the operator placed it on
    commands, decisions = verify_partition(cfg, p, graph=ctx.graph)
    if as_json:
        emit({"ok": True, "partition": p, "commands": commands, "decisions": decisions})
    else:
        say(
            f"verify ok: partition {p}: {commands} commands → {decisions} decisions, "
            "identical bytes"
        )


def audit_kafka(as_json: bool) -> None:
    """Re-project the --graph from Kafka into a scratch store; compare with --data."""
    from claimgraph.service.audit import compare_with_reprojection

    ctx = CTX
    if not (Path(ctx.data) / "projection").exists():
        raise ConfigError(f"{ctx.data} holds no projection to audit")
    rows, head = compare_with_reprojection(ctx.kafka(), ctx.graph, Path(ctx.data))
    if as_json:
        emit({"ok": True, "rows": rows, "head": head})
    else:
        say(f"audit ok: {rows} rows identical up to v{head}")


def register(app: typer.Typer) -> None:
    app.add_typer(kafka_app, name="kafka", rich_help_panel="Kafka")
    app.command("governor", rich_help_panel="Kafka")(governor)
    app.command("projector", rich_help_panel="Kafka")(projector)
