"""The Kafka layout: the topics ``kafka init`` creates and checks, and where each graph lives.

Topics (``PREFIX`` defaults to ``claimgraph``), all created by ``claimgraph kafka init`` and by
nothing else (no client of ours lets a producer auto-create a topic):

==================  ===========  =====================================================
``PREFIX.commands``   N parts     delete, kept forever, LogAppendTime, max.message.bytes
                                  ``LIMITS["decision_bytes"]``
``PREFIX.decisions``  N parts     delete, kept forever, max.message.bytes twice that
``PREFIX.runs``       N parts     delete, kept forever
``PREFIX.placements`` 1 part      compact: the registry
==================  ===========  =====================================================

Every topic has the asked replication and ``min.insync.replicas`` (2 from replication 3,
else 1). The logs are kept forever: ``verify`` replays them, and erasure never relies on
retention (it tombstones a claim's payload in every read, :mod:`claimgraph.core.erasure`).
``init`` checks the settings of topics that exist and fails naming every mismatch; asked for
more partitions it grows the partitioned topics together, which moves no graph.

**Placement.** Placing a graph is an admin step (``claimgraph kafka place``) of two records:

1. a ``place`` command in the chosen partition of the commands topic: the governor learns the
   placement from the log it decides (:mod:`claimgraph.core.governor.placement`), and so does
   replay;
2. then graph → partition in the compacted registry ``PREFIX.placements``, which writers read
   to route: they refuse a graph that is not placed and produce to its partition explicitly,
   whatever their client's partitioner.

The registry also holds the **layout record** ``kafka init`` writes (key :data:`LAYOUT_KEY`,
never a graph name): the ids of the topics it created or checked. Writers and governors refuse
to run unless it is there and the topics still have those ids — a topic auto-created by some
client, or deleted and re-created, has another id.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from claimgraph.core.governor.placement import valid_graph_name
from claimgraph.core.model import LIMITS
from claimgraph.core.wire import encode_command
from claimgraph.errors import ConfigError, StorageError
from claimgraph.logs.kafka import KafkaConfig, KafkaLog, read_partition

__all__ = [
    "COMMAND_RECORD_BYTES",
    "DECISION_RECORD_BYTES",
    "LAYOUT_KEY",
    "Placement",
    "Registry",
    "check_layout",
    "init_topics",
    "legacy_partition",
    "place_graph",
    "placement",
    "read_registry",
    "topic_config",
    "wait_for_leaders",
]

LAYOUT_KEY = b"\x00layout"  # the layout record's key in the registry (not a graph name)
COMMAND_RECORD_BYTES = LIMITS["decision_bytes"]  # max.message.bytes of the commands topic
DECISION_RECORD_BYTES = 2 * LIMITS["decision_bytes"]  # ... of the decisions topic
_ROLES = ("commands", "decisions", "runs", "placements")
_PARTITIONED = ("commands", "decisions", "runs")


def legacy_partition(graph: str, partitions: int) -> int:
    """Where claimgraph put a graph before placement (``crc32 % partitions``): the partition
    ``kafka place`` adopts an existing graph on by default."""
    return zlib.crc32(graph.encode("utf-8")) % partitions


def _hint(cfg: KafkaConfig, graph: str | None = None, *rest: str) -> str:
    g = f" --graph {graph}" if graph is not None else ""
    return f"claimgraph --bootstrap {cfg.bootstrap} --prefix {cfg.prefix}{g} {' '.join(rest)}"


# -- what the topics must be ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    role: str
    name: str
    partitions: int
    configs: dict[str, str]


def _specs(cfg: KafkaConfig) -> list[_Spec]:
    min_isr = "2" if cfg.replication >= 3 else "1"
    forever = {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "min.insync.replicas": min_isr,
    }
    return [
        _Spec(
            "commands",
            cfg.commands_topic,
            cfg.partitions,
            {
                **forever,
                "message.timestamp.type": "LogAppendTime",
                "max.message.bytes": str(COMMAND_RECORD_BYTES),
            },
        ),
        _Spec(
            "decisions",
            cfg.decisions_topic,
            cfg.partitions,
            {**forever, "max.message.bytes": str(DECISION_RECORD_BYTES)},
        ),
        _Spec("runs", cfg.runs_topic, cfg.partitions, dict(forever)),
        _Spec(
            "placements",
            cfg.placements_topic,
            1,
            {"cleanup.policy": "compact", "min.insync.replicas": min_isr},
        ),
    ]


@dataclass(frozen=True, slots=True)
class _Existing:
    topic_id: str
    partitions: int
    replication: tuple[int, ...]  # replicas of each partition


def _describe_topics(admin: AdminClient, names: Sequence[str]) -> dict[str, _Existing]:
    """The topics of ``names`` that exist (ids, partitions, replication)."""
    found = admin.list_topics(timeout=15).topics
    present = [n for n in names if n in found and found[n].error is None]
    out: dict[str, _Existing] = {}
    if not present:
        return out
    futures = admin.describe_topics(TopicCollection(present), request_timeout=15)
    for name, fut in futures.items():
        try:
            desc = fut.result()
        except KafkaException as exc:
            raise StorageError(f"cannot describe topic {name}: {exc.args[0].str()}") from None
        out[name] = _Existing(
            str(desc.topic_id),
            len(desc.partitions),
            tuple(len(p.replicas) for p in desc.partitions),
        )
    return out


def topic_config(cfg: KafkaConfig, topic: str, admin: AdminClient | None = None) -> dict[str, str]:
    """Every config value of ``topic`` (defaults included)."""
    admin = admin or AdminClient(cfg.client())
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([res], request_timeout=15)[res].result(timeout=20)
    except KafkaException as exc:
        raise StorageError(f"cannot read the configs of {topic}: {exc.args[0].str()}") from None
    return {k: str(v.value) for k, v in entries.items()}


def _mismatches(
    admin: AdminClient, cfg: KafkaConfig, spec: _Spec, have: _Existing, all_have: dict[str, int]
) -> list[str]:
    out: list[str] = []
    configs = topic_config(cfg, spec.name, admin)
    for key, want in spec.configs.items():
        if configs.get(key) != want:
            out.append(f"{spec.name}: {key} is {configs.get(key)!r}, must be {want!r}")
    wrong = sorted({r for r in have.replication if r != cfg.replication})
    if wrong:
        out.append(
            f"{spec.name}: replication is {'/'.join(map(str, wrong))}, asked for "
            f"{cfg.replication} (pass --replication to match the cluster's topics)"
        )
    if spec.role == "placements" and have.partitions != 1:
        out.append(f"{spec.name}: has {have.partitions} partitions, must have 1")
    commands = all_have.get("commands")
    if spec.role in ("decisions", "runs") and commands not in (None, have.partitions):
        out.append(
            f"{spec.name}: has {have.partitions} partitions, the commands topic "
            f"{commands} (they must be equal)"
        )
    return out


# -- kafka init -------------------------------------------------------------------------------


def init_topics(cfg: KafkaConfig, timeout: float = 30.0) -> list[str]:
    """Create the topics that do not exist, check those that do; one report line per topic.

    Idempotent. Raises :class:`ConfigError` naming every setting of an existing topic that
    differs from what claimgraph needs (nothing is created or changed then). Asked for more
    partitions than the partitioned topics have, grows them together (graphs stay where the
    registry placed them); asked for fewer, leaves them as they are. Last, records the topic
    ids in the registry's layout record: writers and governors run only on these topics.
    """
    admin = AdminClient(cfg.client())
    specs = _specs(cfg)
    existing = _describe_topics(admin, [s.name for s in specs])
    parts = {s.role: existing[s.name].partitions for s in specs if s.name in existing}
    problems: list[str] = []
    for spec in specs:
        if spec.name in existing:
            problems += _mismatches(admin, cfg, spec, existing[spec.name], parts)
    if problems:
        raise ConfigError(
            f"kafka init: the existing topics of prefix {cfg.prefix!r} on {cfg.bootstrap} are "
            "not what claimgraph needs (nothing was changed):\n  "
            + "\n  ".join(problems)
            + "\nFix each setting (kafka-configs.sh --alter --entity-type topics "
            "--entity-name TOPIC --add-config KEY=VALUE), or use a new --prefix."
        )
    report: list[str] = []
    create: list[NewTopic] = []
    grow: dict[str, NewPartitions] = {}
    for spec in specs:
        have = existing.get(spec.name)
        if have is None:
            create.append(
                NewTopic(spec.name, spec.partitions, cfg.replication, config=spec.configs)
            )
            shown = ", ".join(f"{k}={v}" for k, v in sorted(spec.configs.items()))
            report.append(
                f"created  {spec.name}: {spec.partitions} partitions, replication "
                f"{cfg.replication}, {shown}"
            )
        elif spec.role in _PARTITIONED and have.partitions < spec.partitions:
            grow[spec.name] = NewPartitions(spec.name, spec.partitions)
            report.append(
                f"grown    {spec.name}: {have.partitions} → {spec.partitions} partitions "
                "(no graph moves: the registry pins each)"
            )
        else:
            note = ""
            if spec.role in _PARTITIONED and have.partitions > spec.partitions:
                note = f" (asked for {spec.partitions}; partitions are never removed)"
            report.append(f"checked  {spec.name}: {have.partitions} partitions{note}, settings ok")
    _create(admin, create, timeout)
    if grow:
        for name, fut in admin.create_partitions(list(grow.values())).items():
            try:
                fut.result(timeout=timeout)
            except KafkaException as exc:
                raise StorageError(f"cannot grow {name}: {exc.args[0].str()}") from None
    wait_for_leaders(admin, [s.name for s in specs], timeout)
    _write_layout(cfg, admin, specs, existing)
    return report


def _create(admin: AdminClient, topics: list[NewTopic], timeout: float) -> None:
    if not topics:
        return
    for name, fut in admin.create_topics(topics, operation_timeout=timeout).items():
        try:
            fut.result(timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0]
            raise StorageError(
                f"cannot create topic {name}: {err.str()} (if another kafka init created it "
                "meanwhile, run kafka init again: it checks what exists)"
            ) from None


def _write_layout(
    cfg: KafkaConfig, admin: AdminClient, specs: list[_Spec], before: Mapping[str, _Existing]
) -> None:
    """Write the layout record (topic ids) unless the registry already has this one."""
    now = _describe_topics(admin, [s.name for s in specs])
    registry = read_registry(cfg)
    old = registry.layout or {}
    commands = now[cfg.commands_topic]
    # the partition count graphs were hashed over before placement existed: kept from the
    # first layout record, else what the commands topic had before this init grew it
    legacy = old.get(
        "legacy_partitions",
        before[cfg.commands_topic].partitions
        if cfg.commands_topic in before
        else commands.partitions,
    )
    layout = {
        "written_by": "claimgraph kafka init",
        "topics": {s.role: {"name": s.name, "id": now[s.name].topic_id} for s in specs},
        "partitions": commands.partitions,
        "legacy_partitions": legacy,
    }
    if old == layout:
        return
    log = KafkaLog(cfg, cfg.placements_topic, 0, key=LAYOUT_KEY)
    try:
        log.append([json.dumps(layout, sort_keys=True).encode("utf-8")])
    finally:
        log.close()


# -- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Registry:
    """The registry as read: the layout record (None: ``kafka init`` never ran) and graph →
    partition."""

    cfg: KafkaConfig
    layout: dict[str, Any] | None
    placements: dict[str, int] = field(default_factory=dict)

    def partition_of(self, graph: str) -> int:
        """The partition ``graph`` is placed on (ConfigError naming the command to place it)."""
        p = self.placements.get(graph)
        if p is None:
            raise ConfigError(
                f"graph {graph!r} is not placed on a partition of {self.cfg.prefix}.commands: "
                f"an admin places it once, then writers produce there "
                f"(run: {_hint(self.cfg, graph, 'kafka place')})"
            )
        return p


def read_registry(cfg: KafkaConfig, timeout: float = 15.0) -> Registry:
    """Read the registry topic to its end (ConfigError if it does not exist)."""
    admin = AdminClient(cfg.client())
    md = admin.list_topics(timeout=timeout).topics.get(cfg.placements_topic)
    if md is None or md.error is not None:
        raise ConfigError(
            f"the topics of prefix {cfg.prefix!r} on {cfg.bootstrap} were not created by "
            f"claimgraph kafka init (no {cfg.placements_topic}); "
            f"run: {_hint(cfg, None, 'kafka init')}"
        )
    layout: dict[str, Any] | None = None
    placements: dict[str, int] = {}
    for rec, key in read_partition(cfg, cfg.placements_topic, 0, 0, None, timeout):
        if key is None or not rec.value:
            continue
        try:
            doc = json.loads(rec.value)
        except ValueError:
            continue  # not ours: the registry's readers only trust records they can read
        if key == LAYOUT_KEY and isinstance(doc, dict):
            layout = doc
            continue
        try:
            graph = key.decode("utf-8")
        except UnicodeDecodeError:
            continue
        p = doc.get("partition") if isinstance(doc, dict) else None
        if isinstance(p, int) and not isinstance(p, bool) and valid_graph_name(graph):
            placements[graph] = p
    return Registry(cfg, layout, placements)


def check_layout(cfg: KafkaConfig) -> Registry:
    """The registry, after checking the topics are the ones ``kafka init`` created or checked.

    Writers and governors call this before producing: a topic auto-created by a client, or
    deleted and re-created since, has another id than the layout record names.
    """
    registry = read_registry(cfg)
    layout = registry.layout
    if layout is None:
        raise ConfigError(
            f"the topics of prefix {cfg.prefix!r} on {cfg.bootstrap} were not checked by "
            f"claimgraph kafka init (no layout record); run: {_hint(cfg, None, 'kafka init')}"
        )
    admin = AdminClient(cfg.client())
    recorded = {role: layout["topics"][role] for role in ("commands", "decisions")}
    now = _describe_topics(admin, [t["name"] for t in recorded.values()])
    for t in recorded.values():
        have = now.get(t["name"])
        if have is None or have.topic_id != t["id"]:
            what = "does not exist" if have is None else "is not the topic it created"
            raise ConfigError(
                f"{t['name']} {what}: kafka init recorded topic id {t['id']} (a topic "
                f"auto-created by a client, or deleted and re-created, has another id); "
                f"run: {_hint(cfg, None, 'kafka init')} to check it"
            )
    return registry


def placement(cfg: KafkaConfig, graph: str) -> int:
    """The partition ``graph`` is placed on, after :func:`check_layout` (ConfigError if none)."""
    return check_layout(cfg).partition_of(graph)


@dataclass(frozen=True, slots=True)
class Placement:
    """What ``kafka place`` did: the partition, and the place record's offset (None: the
    graph was placed there already)."""

    graph: str
    partition: int
    offset: int | None


def place_graph(
    cfg: KafkaConfig, graph: str, partition: int | None = None, agent: str = "claimgraph-kafka"
) -> Placement:
    """Place ``graph`` on ``partition`` (default: where claimgraph put it before placement).

    Writes the ``place`` command into that commands partition first, then the registry
    record: a writer that finds the graph in the registry produces after the place record, so
    the governor has placed the graph before it decides any of those commands. Placing a
    graph again on its partition does nothing; a placement never moves.
    """
    if not valid_graph_name(graph):
        raise ConfigError(
            f"{graph[:80]!r} cannot be placed: a graph name is 1-256 printable characters, "
            "not starting with '_'"
        )
    registry = check_layout(cfg)
    assert registry.layout is not None
    have = registry.placements.get(graph)
    if have is not None:
        if partition is not None and partition != have:
            raise ConfigError(
                f"graph {graph!r} is placed on partition {have}: a placement never moves "
                "(its history is in that partition)"
            )
        return Placement(graph, have, None)
    count = _describe_topics(AdminClient(cfg.client()), [cfg.commands_topic])
    parts = count[cfg.commands_topic].partitions
    if partition is None:
        partition = legacy_partition(graph, int(registry.layout["legacy_partitions"]))
    if not 0 <= partition < parts:
        raise ConfigError(f"{cfg.commands_topic} has partitions 0-{parts - 1}, not {partition}")
    record = encode_command(
        {
            "type": "place",
            "command_id": f"place-{uuid.uuid4().hex}",
            "graph": graph,
            "agent": agent,
            "task": "place",
            "partition": partition,
        }
    )
    commands = KafkaLog(cfg, cfg.commands_topic, partition, key=graph)
    try:
        offset = commands.append([record])[0]
    finally:
        commands.close()
    log = KafkaLog(cfg, cfg.placements_topic, 0, key=graph)
    try:
        log.append([json.dumps({"partition": partition, "place_offset": offset}).encode()])
    finally:
        log.close()
    won = read_registry(cfg).placements.get(graph)
    if won != partition:
        raise ConfigError(
            f"graph {graph!r} was placed on partition {won} by someone else meanwhile; "
            f"the place record at {cfg.commands_topic}[{partition}]@{offset} is unused"
        )
    return Placement(graph, partition, offset)


def wait_for_leaders(admin: AdminClient, topics: list[str], timeout: float) -> None:
    """Block until every partition of ``topics`` has a leader (new topics are usable)."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=timeout).topics
        if all(
            t in md
            and md[t].error is None
            and md[t].partitions
            and all(p.leader >= 0 for p in md[t].partitions.values())
            for t in topics
        ):
            return
        if time.monotonic() >= deadline:
            raise StorageError(f"topics {', '.join(topics)} have no leader after {timeout:g}s")
        time.sleep(0.2)
