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

A registry record is a claim anyone with write access to the registry could forge, so it is
trusted only against the log (:func:`verified_placement`): the decision of the command at its
``place_offset`` in the partition it names must be an accepted ``place`` of that graph by the
configured operator (``KafkaConfig.operator``). Writers check it before their first write,
projectors before projecting, ``verify`` before replaying; a record that fails it stops them
with an :class:`~claimgraph.errors.IntegrityError` naming what the log holds instead — a
graph is never re-homed by a registry record.

The registry also holds the **layout record** ``kafka init`` writes (key :data:`LAYOUT_KEY`,
never a graph name): the ids of the topics it created or checked. Writers and governors refuse
to run unless it is there, well formed, and the topics still have those ids — a topic
auto-created by some client, or deleted and re-created, has another id.
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
from claimgraph.core.model import LIMITS, Decision
from claimgraph.core.wire import decode_decision, encode_command
from claimgraph.errors import ConfigError, DecodeError, IntegrityError, StorageError
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
    "place_decision",
    "place_graph",
    "placement",
    "read_registry",
    "topic_config",
    "verified_placement",
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


def _describe_every(
    admin: AdminClient, names: Sequence[str], timeout: float
) -> dict[str, _Existing]:
    """Every topic of ``names`` described, or a StorageError naming the missing ones.

    Just after a topic is created, the broker a metadata request reaches may not know it
    yet (in a cluster each broker's metadata cache catches up on its own): ask again until
    all are known, within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        out = _describe_topics(admin, names)
        missing = [n for n in names if n not in out]
        if not missing:
            return out
        if time.monotonic() >= deadline:
            raise StorageError(
                f"topics {', '.join(missing)} are not in the cluster's metadata after "
                f"{timeout:g}s (created by kafka init just now?); run kafka init again"
            )
        time.sleep(0.2)


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
    return out  # partitioned topics of unequal counts are grown together by init_topics


# -- kafka init -------------------------------------------------------------------------------


def init_topics(cfg: KafkaConfig, timeout: float = 30.0) -> list[str]:
    """Create the topics that do not exist, check those that do; one report line per topic.

    Idempotent. Raises :class:`ConfigError` naming every setting of an existing topic that
    differs from what claimgraph needs (nothing is created or changed then). Asked for more
    partitions than the partitioned topics have, grows them together (graphs stay where the
    registry placed them); asked for fewer, leaves them as they are. Partitioned topics of
    unequal counts (one grown alone) are all grown to the largest: the grow is finished.
    Last, records the topic ids in the registry's layout record: writers and governors run
    only on these topics.
    """
    admin = AdminClient(cfg.client())
    names = [s.name for s in _specs(cfg)]
    existing = _describe_topics(admin, names)
    # a half-grown layout (one partitioned topic grown alone, or an init that stopped midway)
    # is finished: every partitioned topic grows to the largest count among them
    widest = max(
        [cfg.partitions]
        + [
            existing[s.name].partitions
            for s in _specs(cfg)
            if s.name in existing and s.role in _PARTITIONED
        ]
    )
    specs = [
        _Spec(s.role, s.name, widest, s.configs) if s.role in _PARTITIONED else s
        for s in _specs(cfg)
    ]
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
            half = " (finishing a half-grown layout)" if spec.partitions > cfg.partitions else ""
            report.append(
                f"grown    {spec.name}: {have.partitions} → {spec.partitions} partitions "
                f"(no graph moves: the registry pins each){half}"
            )
        else:
            note = ""
            if spec.role in _PARTITIONED and have.partitions > cfg.partitions:
                note = f" (asked for {cfg.partitions}; partitions are never removed)"
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
    now = _describe_every(admin, [s.name for s in specs], 30.0)
    registry = read_registry(cfg)
    old = registry.layout or {}
    if _layout_problem(old) is not None:
        old = {}  # a malformed record (not ours) is written again
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
    place_offsets: dict[str, int | None] = field(default_factory=dict)  # of the place records

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
    offsets: dict[str, int | None] = {}
    for rec, key in read_partition(cfg, cfg.placements_topic, 0, 0, None, timeout):
        if key is None or not rec.value:
            continue
        try:
            doc = json.loads(rec.value)
        except ValueError:
            continue  # not ours: the registry's readers only trust records they can read
        if key == LAYOUT_KEY:
            layout = doc if isinstance(doc, dict) else {"malformed": doc}
            continue
        try:
            graph = key.decode("utf-8")
        except UnicodeDecodeError:
            continue
        p = doc.get("partition") if isinstance(doc, dict) else None
        if isinstance(p, int) and not isinstance(p, bool) and valid_graph_name(graph):
            placements[graph] = p
            o = doc.get("place_offset")
            offsets[graph] = o if isinstance(o, int) and not isinstance(o, bool) else None
    return Registry(cfg, layout, placements, offsets)


def _layout_problem(layout: dict[str, Any]) -> str | None:
    """What is wrong with a layout record (None: it names every topic by name and id)."""
    topics = layout.get("topics")
    if not isinstance(topics, dict):
        return "it has no 'topics' table"
    for role in _ROLES:
        t = topics.get(role)
        if not (isinstance(t, dict) and isinstance(t.get("name"), str) and "id" in t):
            return f"its 'topics' table has no name and id for {role!r}"
    for k in ("partitions", "legacy_partitions"):
        v = layout.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return f"its {k!r} is {v!r}, not a partition count"
    return None


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
    problem = _layout_problem(layout)
    if problem is not None:
        raise ConfigError(
            f"the layout record in {cfg.placements_topic} is malformed ({problem}): it was not "
            f"written by claimgraph kafka init; run: {_hint(cfg, None, 'kafka init')} to "
            "write it again (and let only the operator write that topic)"
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
    """The partition the registry names for ``graph``, after :func:`check_layout` (ConfigError
    if none) — as the registry says, not verified: :func:`verified_placement` is."""
    return check_layout(cfg).partition_of(graph)


def place_decision(
    cfg: KafkaConfig, partition: int, place_offset: int, wait: float = 0.0
) -> Decision | None:
    """The decision of the command at ``commands[partition]@place_offset``, from the decisions
    partition (committed decisions only); None if it is not decided within ``wait`` seconds.

    A partition's decisions are in the order of its commands, so the first decision whose
    ``input_offset`` is at least ``place_offset`` is found by bisection over the decisions'
    offsets (a few reads, however long the partition). IntegrityError if no decision has
    that input offset although a later command is decided (no command is at that offset).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    topic = cfg.decisions_topic
    consumer = Consumer(
        cfg.client(
            **{
                "group.id": "claimgraph-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
    )

    def first_at(offset: int, wait: float) -> tuple[int, Decision] | None:
        """The first committed decision at or after ``offset``; None once the end is reached
        and ``wait`` seconds have passed without one."""
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + wait
        at_end = False
        while True:
            m = consumer.poll(0.2)
            now = time.monotonic()
            if m is None:
                if at_end and now >= deadline:
                    return None
                if now >= deadline + 15:
                    raise StorageError(f"no answer reading {topic}[{partition}] at {offset}")
                continue
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise StorageError(f"reading {topic}[{partition}]: {err.str()}")
                at_end = True
                if now >= deadline:
                    return None
                continue
            try:
                return int(m.offset() or 0), decode_decision(m.value() or b"")
            except DecodeError as exc:
                raise IntegrityError(
                    f"{topic}[{partition}]@{m.offset()} is not a decision: {exc}", m.offset()
                ) from None

    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        )
        found: tuple[int, Decision] | None = None
        lo, hi = int(low), int(high)
        while lo < hi:  # the first decision with input_offset >= place_offset is in [lo, hi)
            mid = (lo + hi) // 2
            got = first_at(mid, 0.0)
            if got is None or got[1]["input_offset"] >= place_offset:
                if got is not None:
                    found = got
                hi = mid
            else:
                lo = got[0] + 1
        if found is None:  # not decided yet: wait for the next decisions
            deadline = time.monotonic() + wait
            start = int(high)
            while found is None:
                left = deadline - time.monotonic()
                got = first_at(start, max(0.0, left))
                if got is None:
                    return None
                if got[1]["input_offset"] >= place_offset:
                    found = got
                start = got[0] + 1
        if found[1]["input_offset"] != place_offset:
            raise IntegrityError(
                f"no decision in {topic}[{partition}] decides "
                f"{cfg.commands_topic}[{partition}]@{place_offset} (the next decided command is "
                f"at {found[1]['input_offset']}): no place record is there",
                found[0],
            )
        return found[1]
    finally:
        consumer.close()


def verified_placement(
    cfg: KafkaConfig, graph: str, registry: Registry | None = None, *, wait: float = 0.0
) -> tuple[int, Decision]:
    """The partition ``graph`` is placed on, and its place decision — only if the log confirms
    the registry: the decision of the command at the record's ``place_offset`` in the
    partition it names is an accepted ``place`` of ``graph`` on that partition by
    ``cfg.operator``. Else IntegrityError naming what the log holds (never a re-home);
    StorageError when that command is not decided within ``wait`` seconds (no governor)."""
    registry = check_layout(cfg) if registry is None else registry
    partition = registry.partition_of(graph)
    offset = registry.place_offsets.get(graph)
    refused = f"placement of graph {graph!r} on partition {partition} refused"
    if offset is None:
        raise IntegrityError(
            f"{refused}: its registry record names no place_offset (kafka place writes one); "
            f"an operator places it again: {_hint(cfg, graph, 'kafka place')}",
            None,
        )
    d = place_decision(cfg, partition, offset, wait)
    where = f"{cfg.commands_topic}[{partition}]@{offset}"
    if d is None:
        raise StorageError(
            f"the place record of graph {graph!r} at {where} is not decided yet (waited "
            f"{wait:g}s): is a governor running for partition {partition}? "
            f"(claimgraph governor --partition {partition})"
        )
    held = (d["command_type"], d["graph"], d["kind"], d["count"])
    if held != ("place", graph, "accepted", partition) or d["agent"] != cfg.operator:
        what = (
            f"{d['kind']} {d['command_type']} of graph {d['graph']!r} by {d['agent']!r} "
            f"({d['reason']})"
        )
        raise IntegrityError(
            f"{refused}: the decision of {where} is {what}, not an accepted place of it on "
            f"partition {partition} by the operator {cfg.operator!r} — the registry record "
            f"is not the operator's (only the operator writes {cfg.placements_topic}); "
            f"an operator places it again: {_hint(cfg, graph, 'kafka place')}",
            d["input_offset"],
        )
    return partition, d


@dataclass(frozen=True, slots=True)
class Placement:
    """What ``kafka place`` did: the partition, and the place record's offset (None: the
    graph was placed there already)."""

    graph: str
    partition: int
    offset: int | None


def place_graph(
    cfg: KafkaConfig, graph: str, partition: int | None = None, agent: str | None = None
) -> Placement:
    """Place ``graph`` on ``partition`` (default: where claimgraph put it before placement),
    as ``agent`` (default: the configured operator, the only agent governors accept it from).

    Writes the ``place`` command into that commands partition first, then the registry
    record: a writer that finds the graph in the registry produces after the place record, so
    the governor has placed the graph before it decides any of those commands. Placing a
    graph again on its partition does nothing, unless its placement was decided before rules
    revision 6 (then a new place record re-confirms it as the operator's); a placement never
    moves. A registry record the log does not confirm (:func:`verified_placement`) is not a
    placement: the graph is placed as if it had none.
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
        try:
            _, d = verified_placement(cfg, graph, registry)
        except StorageError:  # its place record is not decided yet: it stands
            d = None
        except IntegrityError:
            have = None  # not the operator's: placed below as if it had no record
        if have is not None:
            if partition is not None and partition != have:
                raise ConfigError(
                    f"graph {graph!r} is placed on partition {have}: a placement never moves "
                    "(its history is in that partition)"
                )
            if d is None or d["rules"] >= 6:
                return Placement(graph, have, None)
            partition = have  # decided before revision 6: re-confirmed by a new place record
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
            "agent": cfg.operator if agent is None else agent,
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
    after = read_registry(cfg)
    won = after.placements.get(graph)
    if won != partition or after.place_offsets.get(graph) != offset:
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
