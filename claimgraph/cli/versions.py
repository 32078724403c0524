"""CLI commands for versions over time: ``gc``, ``pin``, ``checkpoint``, ``replica``, ``erase``,
``rebuild``.

Each works on the embedded graph in ``--data``, or — with ``--bootstrap`` — on the Kafka
projector directory in ``--data`` (gc and restore need that projector stopped: RocksDB allows
one writer, and the error says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from claimgraph.cli.catalogue import add_write
from claimgraph.cli.common import CTX, HelpGroup, emit, graph_session, progress, say
from claimgraph.core.commands import cut
from claimgraph.errors import ConfigError, NotFoundError, StorageError

__all__ = ["register"]

pin_app = typer.Typer(
    cls=HelpGroup,
    help="Pins: versions held readable for live runs (gc never passes a live pin).",
    no_args_is_help=True,
)
checkpoint_app = typer.Typer(
    cls=HelpGroup,
    help="Checkpoints of the projection and folded state, for fast restarts and restores.",
    no_args_is_help=True,
)
replica_app = typer.Typer(
    cls=HelpGroup,
    help="Read replicas: the projection opened read-only by another process.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@contextmanager
def _needs_the_writer_stopped(what: str) -> Iterator[None]:
    """A command that replaces what the directory's writer holds: say which process to stop."""
    from claimgraph.logs.rocks import is_locked
    from claimgraph.service.local import ANNOUNCEMENT, read_announcement

    try:
        yield
    except StorageError as exc:
        ann = read_announcement(Path(CTX.data))
        if not is_locked(exc) or ann is None or not ann.alive():
            raise
        raise StorageError(
            f"{what} replaces what the running writer of {CTX.data} holds: stop that process "
            f"first (pid {ann.pid}, {Path(CTX.data) / ANNOUNCEMENT})"
        ) from None


def _data() -> Path:
    data = Path(CTX.data)
    if not (data / "graph.json").exists():
        raise ConfigError(f"{data} is not a claimgraph data or projector directory")
    return data


# -- gc ---------------------------------------------------------------------------------------


def gc(
    horizon: Annotated[
        int | None, typer.Option("--horizon", help="Prune below this version.")
    ] = None,
    keep: Annotated[
        int | None, typer.Option("--keep", help="Keep the newest N versions readable.")
    ] = None,
    keep_age: Annotated[
        str | None,
        typer.Option("--keep-age", help="Keep versions younger than AGE readable (30d, 12h)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Prune the projection to a horizon: reads at or above it are unchanged, reads below it
    raise VersionPruned. Never passes a live pin; the decisions log is never touched."""
    from claimgraph.projections.retention import gc_graph, parse_age

    age = parse_age(keep_age) if keep_age is not None else None
    ctx = CTX
    if ctx.bootstrap:
        with progress("gc") as cb:
            rep = _gc_kafka(horizon, keep, age, cb)
    else:
        from claimgraph.service.attached import AttachedGraph

        _data()
        with graph_session() as g, progress("gc") as cb:
            if isinstance(g, AttachedGraph):  # serve (or another writer) holds it: it GCs
                rep = g.gc(horizon=horizon, keep=keep, keep_age_ms=age)
            else:
                rep = gc_graph(g, horizon=horizon, keep=keep, keep_age_ms=age, progress=cb)
    if as_json:
        emit(rep.as_dict())
        return
    held = (
        f" (held back by pin {rep.held_by.pin_id} of {rep.held_by.owner} at v{rep.held_by.version})"
        if rep.held_by
        else ""
    )
    say(
        f"gc: horizon v{rep.horizon}{held}; {rep.deleted} of {rep.scanned} rows pruned "
        f"in {rep.seconds:.2f}s"
    )


def _gc_kafka(horizon: int | None, keep: int | None, age: int | None, progress: Any) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    from claimgraph.logs.kafka_layout import placement
    from claimgraph.projections.projector import ProjectionStore
    from claimgraph.projections.retention import PinRegistry, gc_projection, resolve_horizon

    ctx = CTX
    data = _data()
    store = ProjectionStore(data / "projection")  # StorageError if the projector is running
    try:
        head = store.applied()
        cfg = ctx.kafka()

        def version_at(t: int) -> int:
            p = placement(cfg, ctx.graph)
            c = Consumer(cfg.client(**{"group.id": f"{cfg.prefix}-gc"}))
            try:
                tp = c.offsets_for_times([TopicPartition(cfg.decisions_topic, p, t)], 10)[0]
            finally:
                c.close()
            return head + 1 if tp.offset < 0 else int(tp.offset)

        target = resolve_horizon(
            head, horizon=horizon, keep=keep, keep_age_ms=age, version_at=version_at
        )
        return gc_projection(store.db, PinRegistry(data), target, progress=progress)
    finally:
        store.close()


# -- pins -------------------------------------------------------------------------------------


@pin_app.command("add")
def pin_add(
    version: Annotated[int, typer.Argument(help="The version to hold readable.")],
    owner: Annotated[str, typer.Option(help="Who holds it (a run id).")] = "cli",
    lease: Annotated[float, typer.Option(help="Seconds until the pin expires.")] = 3600.0,
    as_json: JsonOpt = False,
) -> None:
    """Pin a version (refused if it is already below the horizon)."""
    from claimgraph.projections.retention import PinRegistry

    p = PinRegistry(_data()).pin(version, owner, lease)
    if as_json:
        emit(p.as_dict())
    else:
        say(f"pinned v{p.version} for {p.owner}: {p.pin_id} (lease {lease:g}s)")


@pin_app.command("list")
def pin_list(as_json: JsonOpt = False) -> None:
    """Live pins, oldest version first, and the horizon gc agreed to."""
    from claimgraph.projections.retention import PinRegistry

    reg = PinRegistry(_data())
    pins = reg.live()
    if as_json:
        emit({"horizon": reg.horizon(), "pins": [p.as_dict() for p in pins]})
        return
    say(f"horizon v{reg.horizon()}; {len(pins)} live pin(s)")
    for p in pins:
        say(f"  {p.pin_id}  v{p.version}  {p.owner}  expires_at={p.expires_at}")


@pin_app.command("remove")
def pin_remove(pin_id: Annotated[str, typer.Argument(help="The pin's id.")]) -> None:
    """Release a pin (a run ended)."""
    from claimgraph.projections.retention import PinRegistry

    if not PinRegistry(_data()).unpin(pin_id):
        raise NotFoundError(f"no live pin {cut(pin_id)}")
    say(f"unpinned {pin_id}")


# -- checkpoints ------------------------------------------------------------------------------


def _describe(info: Any) -> str:
    return (
        f"{info.name}  v{info.version}  {info.runtime}  horizon v{info.horizon}  "
        f"{info.bytes / 1e6:.1f} MB"
    )


@checkpoint_app.command("create")
def checkpoint_create(
    keep: Annotated[
        int | None, typer.Option(help="Then delete all but the KEEP newest checkpoints.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Checkpoint the projection and folded state at head (Kafka: catch the projector up
    first; a running projector writes its own with --checkpoint-every)."""
    ctx = CTX
    if ctx.bootstrap:
        from claimgraph.streams.kafka_projector import KafkaProjector

        proj = KafkaProjector(ctx.kafka(), ctx.graph, _data())
        try:
            proj.run(idle_exit=1.0)
            info = proj.checkpoint()
        finally:
            proj.close()
    else:
        from claimgraph.projections.checkpoints import checkpoint_graph
        from claimgraph.service.attached import AttachedGraph, local_graph

        with progress("fold") as cb, local_graph(_data(), progress=cb) as g:
            # serve (or another writer) holds it: that process checkpoints
            info = g.checkpoint() if isinstance(g, AttachedGraph) else checkpoint_graph(g)
    if keep is not None:
        from claimgraph.projections.checkpoints import prune_checkpoints

        prune_checkpoints(_data() / "checkpoints", keep)
    if as_json:
        emit(info.as_dict())
    else:
        say(f"checkpoint {_describe(info)}")


@checkpoint_app.command("prune")
def checkpoint_prune(
    keep: Annotated[int, typer.Option(help="How many of the newest checkpoints to keep.")] = 2,
) -> None:
    """Delete old checkpoints (each holds the RocksDB files it was taken from)."""
    from claimgraph.projections.checkpoints import prune_checkpoints

    gone = prune_checkpoints(_data() / "checkpoints", keep)
    say(f"deleted {len(gone)} checkpoint(s)" + "".join(f"\n  {c.name}" for c in gone))


@checkpoint_app.command("list")
def checkpoint_list(as_json: JsonOpt = False) -> None:
    """Checkpoints, oldest first."""
    from claimgraph.projections.checkpoints import list_checkpoints

    found = list_checkpoints(_data() / "checkpoints")
    if as_json:
        emit([c.as_dict() for c in found])
        return
    if not found:
        say("no checkpoints (create one: claimgraph checkpoint create)")
    for c in found:
        say(_describe(c))


@checkpoint_app.command("restore")
def checkpoint_restore(
    name: Annotated[
        str | None, typer.Argument(help="Checkpoint name or version (default: newest).")
    ] = None,
) -> None:
    """Replace the projection with a checkpoint's copy; the log's tail is re-projected on the
    next start. The graph (or projector) must not be running."""
    from claimgraph.projections.checkpoints import pick, restore_checkpoint, restore_graph

    data = _data()
    if CTX.bootstrap:
        from claimgraph.projections.projector import ProjectionStore

        ProjectionStore(data / "projection").close()  # StorageError if the projector runs
        info = pick(data / "checkpoints", name)
        restore_checkpoint(info, data / "projection")
        say(f"restored {_describe(info)}; the projector projects the tail after v{info.version}")
        return
    from claimgraph.service.graph import open_graph

    with _needs_the_writer_stopped("checkpoint restore"):
        info = restore_graph(data, name)
    say(f"restored {_describe(info)}")
    with progress("re-project the tail") as cb:
        g = open_graph(data, progress=cb)  # folds from the checkpoint, projects the tail
        head = g.head()
        g.close()
    say(f"projected the tail: v{info.version + 1}..v{head}")


# -- replicas ---------------------------------------------------------------------------------


@replica_app.command("status")
def replica_status(as_json: JsonOpt = False) -> None:
    """Open the projection as a replica (a RocksDB secondary) and report what it serves."""
    from claimgraph.service.replica import open_replica

    with open_replica(_data()) as r:
        st = r.status()
    if as_json:
        emit(st)
    else:
        say(f"{st['graph']}: replica serves v{st['head']} (horizon v{st['horizon']})")


# -- erasure ----------------------------------------------------------------------------------


# -- rebuild ----------------------------------------------------------------------------------


def rebuild(
    salvage_log: Annotated[
        bool,
        typer.Option(
            "--salvage-log",
            help="Open a log whose write-ahead log is damaged, keeping the records before the "
            "damage (the decisions after it are LOST).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Re-project the projection from the decisions log: the remedy for a damaged projection
    or one that leads its log. The graph must not be running; the old projection is replaced
    only once the new one is complete."""
    if CTX.bootstrap:
        raise ConfigError(
            "rebuild is for the embedded runtime (Kafka: move the projector's projection "
            "away and restart the projector; it re-projects the decisions topic)"
        )
    from claimgraph.service.repair import rebuild as run_rebuild

    with progress("rebuild") as cb, _needs_the_writer_stopped("rebuild"):
        rep = run_rebuild(_data(), salvage_log=salvage_log, progress=cb)
    if as_json:
        emit(rep.as_dict())
        return
    was = f" (it was at v{rep.previous})" if rep.previous is not None else ""
    say(f"rebuilt the projection from the decisions log: v0..v{rep.head}{was}")
    if rep.previous is not None and rep.previous > rep.head:
        say(f"versions v{rep.head + 1}..v{rep.previous} are not in the decisions log: gone")
    if rep.pending:
        say(f"{rep.pending} commands in the log have no decision: the next open decides them")
    if rep.checkpoints_ahead:
        say("checkpoints past the log's end (never used): " + ", ".join(rep.checkpoints_ahead))


def register(app: typer.Typer) -> None:
    app.command("gc", rich_help_panel="Versions and retention")(gc)
    app.add_typer(pin_app, name="pin", rich_help_panel="Versions and retention")
    app.add_typer(checkpoint_app, name="checkpoint", rich_help_panel="Versions and retention")
    app.add_typer(replica_app, name="replica", rich_help_panel="Versions and retention")
    add_write(
        app,
        "erase",
        "erase",
        "Erase claims' payload (evidence, reasoning, properties) from every read at every "
        "version, for PRIVACY requests. Not for correcting wrong data: retract or resolve for "
        "that. The claims stay in the graph; the logs keep their bytes (docs/how-to/versions.md).",
        panel="Versions and retention",
        many="claim_id",
    )
    app.command("rebuild", rich_help_panel="Versions and retention")(rebuild)
