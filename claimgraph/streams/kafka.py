"""The governor on Kafka: a transactional consume → decide → produce loop (exactly once).

One governor owns one partition of the commands topic (and the same partition of the
decisions topic). Its ``transactional.id`` is derived from that partition, so a second
governor for the same partition fences the first (a zombie's next transaction fails) and
aborts whatever the zombie had in flight. Each transaction holds a batch of decisions and
the consumer offset of the commands it decided (``send_offsets_to_transaction`` with the
consumer group metadata, KIP-447): decisions and input position commit together or not at
all, so a crash at any point neither loses nor duplicates a decision.

On start (after ``init_transactions``, so no zombie transaction is still open) the governor
folds the committed decisions log into one :class:`GraphState` per graph and resumes at the
committed input offset; with a checkpoints directory it starts from its newest state snapshot
(:func:`claimgraph.projections.checkpoints.save_states`) and folds only the decisions after it. The
decision logic is the pure core (:func:`decide` and
:meth:`GraphState.evolve`), the very code the embedded runtime runs.

Versions are Kafka offsets, which have gaps; the governor folds decisions by sequence number
and keeps, per graph, the offsets of its *committed* decisions (``GraphState.offsets``) to
translate a claim's ``based_on_version``. A transaction's decisions are contiguous in the
partition, so replay can rebuild exactly what the live governor knew.

Every record gets a decision, whatever its bytes: its key names its graph (:func:`graph_of`;
a key that is no graph name goes to a bucket that is never placed; under rules revision 6 a
key of no graph decided here goes to one shared bucket unless it is an operator's ``place``,
:func:`claimgraph.core.governor.placement.route`), ``decide`` is told the partition (a graph
not placed on it is rejected under rules revision 2) and the operator (revision 6: only it
places a graph), and bounds the decision's size. Nothing is retried forever: a revision-1
decision the decisions topic cannot take, or a record the topic refuses for its size, stops
the governor with a :class:`ConfigError` that says what to do, after the decisions before it
are committed.

Its counters (:class:`GovernorStats`) and :attr:`KafkaGovernor.last_batch` change only once a
transaction has committed. While it runs, a governor is a member of its partition's presence
group (:func:`presence_group`); ``kafka status`` names only such live members
(:func:`live_governors`), never the last committer of a governor that died.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from claimgraph.core.chain import ChainChecker
from claimgraph.core.governor import decide as python_decide
from claimgraph.core.governor.placement import UNPLACED, graph_of, route
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import Decision, Reason
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_decision as python_encode_decision
from claimgraph.core.wire import same_decision
from claimgraph.errors import (
    ClaimgraphError,
    ConfigError,
    DecodeError,
    GovernorFenced,
    IntegrityError,
    StorageError,
)
from claimgraph.logconf import events
from claimgraph.logs.base import LogRecord
from claimgraph.logs.kafka import KafkaConfig, consumer_lag, read_partition, topic_partitions
from claimgraph.logs.kafka_layout import DECISION_RECORD_BYTES, check_layout, topic_config
from claimgraph.native.batch import decide_batch
from claimgraph.native.codec import decode_decision, encode_decision
from claimgraph.native.decide import decide, evolve

__all__ = [
    "CommittedBatch",
    "KafkaGovernor",
    "fold_partition",
    "graph_of",
    "live_governors",
    "presence_group",
    "txn_producer_config",
    "verify_partition",
]

_log = events("governor")

_FRAMING = 1024  # bytes a decision record needs beside its value and key (batch, headers)
_SIZE_ERRORS = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE)

# The transactional producer's tuning, beside the properties a deployment sets (which win).
# A transaction's AddOffsetsToTxn / AddPartitionsToTxn right after the previous commit gets
# CONCURRENT_TRANSACTIONS until the broker has written that commit's markers; librdkafka
# retries it after retry.backoff.ms, 100 ms by default: measured, ~63 of a 1000-command
# transaction's ~73 ms on loopback. From 10 ms librdkafka backs off exponentially up to its
# retry.backoff.max.ms (1 s), so an outage is not hammered (the Java client shortens this
# retry to 20 ms).
TXN_PRODUCER: dict[str, Any] = {
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "retry.backoff.ms": 10,
}


def txn_producer_config(cfg: KafkaConfig, **conf: Any) -> dict[str, Any]:
    """The configuration of a transactional producer: :data:`TXN_PRODUCER` unless the
    deployment's client properties set them, then ``conf``."""
    tuned = {k: v for k, v in TXN_PRODUCER.items() if k not in cfg.extra}
    return cfg.client(**tuned, **conf)


@dataclass
class GovernorStats:
    """Counters exposed as metrics: of committed transactions only (an aborted batch is
    decided again, and counted once, when its retry commits)."""

    commands: int = 0
    decisions_by_kind: dict[str, int] | None = None
    internal_errors: int = 0  # rejected/internal_error: a rule failed (a bug, logged)
    aborts: int = 0
    transactions: int = 0
    lag: int = 0

    def __post_init__(self) -> None:
        if self.decisions_by_kind is None:
            self.decisions_by_kind = {}


@dataclass(frozen=True)
class CommittedBatch:
    """What one committed transaction decided: each decision's kind and its command's append
    time (ms, the commands log's clock), and when the commit returned (s since the epoch)."""

    kinds: list[str]
    appended_ms: list[int]
    committed_at: float


PRESENCE_SESSION_MS = 10_000  # a governor killed leaves its presence group after this


def presence_group(cfg: KafkaConfig, partition: int) -> str:
    """The consumer group a live governor of ``partition`` is a member of (and nothing else
    is): ``kafka status`` names its member as the partition's owner."""
    return f"{cfg.prefix}-governor-p{partition}-alive"


def live_governors(cfg: KafkaConfig, partitions: Sequence[int]) -> dict[int, list[str]]:
    """The owners (``host:pid``) of the governors alive for each partition: the members of
    its presence group. A governor that stopped has left it; one that was killed is gone
    after :data:`PRESENCE_SESSION_MS`."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(cfg.client())
    groups = {p: presence_group(cfg, p) for p in partitions}
    futures = admin.describe_consumer_groups(list(groups.values()), request_timeout=15)
    out: dict[int, list[str]] = {}
    for p, group in groups.items():
        try:
            desc = futures[group].result(timeout=20)
        except KafkaException as exc:
            raise StorageError(f"cannot describe consumer group {group}: {exc}") from None
        out[p] = sorted(m.client_id.removeprefix("governor-") for m in desc.members)
    return out


class _Stuck(Exception):
    """A call into librdkafka did not return within its bound."""


def _bounded(call: Callable[[], object], seconds: float) -> None:
    """Run ``call`` with a hard time bound; re-raise its exception, or raise _Stuck."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="claimgraph-txn-call").start()
    if not done.wait(seconds):
        raise _Stuck(f"a transactional call did not return within {seconds:g}s")
    if failure:
        raise failure[0]


def fold_partition(
    cfg: KafkaConfig,
    partition: int,
    progress: Callable[[int], None] | None = None,
    *,
    start: int = 0,
    states: dict[str, GraphState] | None = None,
) -> tuple[dict[str, GraphState], int]:
    """Fold the committed decisions of a partition into per-graph states (by sequence).

    ``start`` and ``states`` continue from a snapshot. Returns the states and the number of
    decisions folded.
    """
    states = {} if states is None else states
    n = 0
    for rec, key in read_partition(cfg, cfg.decisions_topic, partition, start, None, 30.0):
        d = decode_decision(rec.value)
        graph = key.decode("utf-8") if key else d["graph"]
        st = states.get(graph)
        if st is None:
            st = states[graph] = GraphState(graph)
            st.offsets = None if graph == UNPLACED else []  # the bucket accepts nothing
        evolve(st, d, st.decisions, rec.value)
        if st.offsets is not None:
            st.offsets.append(rec.offset)
        n += 1
        if n % 10000 == 0:
            gc.freeze()
            if progress is not None:
                progress(n)
    gc.freeze()
    return states, n


class KafkaGovernor:
    """Decides the commands of one partition, exactly once, in batched transactions."""

    def __init__(
        self,
        cfg: KafkaConfig,
        partition: int,
        *,
        batch_size: int = 1000,
        batch_ms: int = 100,
        owner: str | None = None,
        on_batch: Callable[[KafkaGovernor, int], None] | None = None,
        checkpoints: Path | None = None,
        checkpoint_every: int | None = None,
        upgrade_oversized: frozenset[str] = frozenset(),
    ) -> None:
        self.cfg = cfg
        self.partition = partition
        self.batch_size = batch_size
        self.batch_ms = batch_ms
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.on_batch = on_batch
        self.transactional_id = f"{cfg.prefix}-governor-p{partition}"
        self.group_id = f"{cfg.prefix}-governor-p{partition}"
        self.states: dict[str, GraphState] = {}
        self.checkpoints = checkpoints
        self.checkpoint_every = checkpoint_every
        self.resumed_from: int | None = None  # the decisions offset the snapshot ended at
        self._last: tuple[int, bytes] | None = None  # the newest decision we produced
        self._since_checkpoint = 0
        self.stats = GovernorStats()
        self.position = -1  # the committed input position: the next command to decide
        self.last_batch: CommittedBatch | None = None  # the newest committed transaction
        self._kinds: list[str] = []  # kinds of the batch being decided, counted on commit
        self._internal = 0  # internal_error decisions of that batch
        # revision-1 graphs whose oversized decision the operator lets revision 2 reject
        self.upgrade_oversized = upgrade_oversized
        self.record_limit = DECISION_RECORD_BYTES  # the decisions topic's max.message.bytes
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._presence: Consumer | None = None
        self._stop = False
        self._fatal_restarts = 0  # fatal producer errors since the last commit

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Fence older governors, rebuild state from the decisions log, seek the input.

        Runs only on the topics ``kafka init`` created or checked, and only when the decisions
        topic takes every decision the rules can make.
        """
        check_layout(self.cfg)
        parts = topic_partitions(self.cfg, self.cfg.commands_topic)
        if self.partition >= parts:
            raise ConfigError(
                f"partition {self.partition} does not exist: {self.cfg.commands_topic} has {parts}"
            )
        limit = int(topic_config(self.cfg, self.cfg.decisions_topic)["max.message.bytes"])
        if limit < DECISION_RECORD_BYTES:
            raise ConfigError(
                f"{self.cfg.decisions_topic} takes records of at most {limit} bytes; decisions "
                f"need {DECISION_RECORD_BYTES} (max.message.bytes; claimgraph kafka init checks it)"
            )
        self.record_limit = limit
        self._producer = Producer(
            txn_producer_config(
                self.cfg,
                **{
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": 60000,
                    "message.max.bytes": limit,
                    "client.id": f"governor-{self.owner}",
                },
            )
        )
        producer = self._producer
        try:  # fences zombies, aborts their open transaction; bounded: it can ignore its timeout
            _bounded(lambda: producer.init_transactions(30), 45)
        except _Stuck:
            self._producer = None  # the stuck call's thread holds it; the next start fences it
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, "init_transactions did not return within 45s")
            ) from None
        states: dict[str, GraphState] | None = None
        begin = 0
        if self.checkpoints is not None:
            from claimgraph.projections.checkpoints import load_states

            def record_at(offset: int) -> bytes | None:
                recs = read_partition(
                    self.cfg, self.cfg.decisions_topic, self.partition, offset, 1, 5.0
                )
                return recs[0][0].value if recs and recs[0][0].offset == offset else None

            def skipped(path: Path, why: str) -> None:
                _log.warning("governor.snapshot_skipped", path=str(path), reason=why)

            found = load_states(self.checkpoints, f"governor-p{self.partition}", record_at, skipped)
            if found is not None:
                self.resumed_from, states = found
                begin = self.resumed_from + 1
        self.states, n = fold_partition(self.cfg, self.partition, start=begin, states=states)
        self._consumer = Consumer(
            self.cfg.client(
                **{
                    "group.id": self.group_id,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "client.id": f"governor-{self.owner}",
                }
            )
        )
        if self._presence is not None:  # a start that failed after joining: leave first
            self._presence.close()
        self._presence = Consumer(
            self.cfg.client(
                **{
                    "group.id": presence_group(self.cfg, self.partition),
                    "client.id": f"governor-{self.owner}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "latest",
                    "session.timeout.ms": PRESENCE_SESSION_MS,
                    "heartbeat.interval.ms": 1000,
                }
            )
        )
        self._presence.subscribe([self.cfg.placements_topic])  # membership is the presence
        tp = TopicPartition(self.cfg.commands_topic, self.partition)
        # resume at the group's committed offset (none: the earliest). Assigned before the
        # offset is asked for: librdkafka holds the first fetch of a partition assigned after
        # a committed() call back by ~1 s, at every (re)start. Nothing else commits to this
        # group once init_transactions has fenced older governors, so both read one offset.
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_STORED)])
        committed = self._consumer.committed([tp], timeout=30)[0].offset
        start = committed if committed >= 0 else 0
        self.position = start
        _log.info(
            "governor.started",
            partition=self.partition,
            owner=self.owner,
            decisions=n,
            resumed_from=self.resumed_from,
            graphs=len(self.states),
            resume_at=start,
        )

    def stop(self) -> None:
        self._stop = True

    def lag(self) -> int:
        """Commands in the partition not yet decided (from the consumer's cached end)."""
        if self._consumer is None:
            return 0
        return consumer_lag(self._consumer, self.cfg.commands_topic, self.partition)

    @property
    def input(self) -> tuple[str, int]:
        """The topic and partition this governor reads (its lag is measured on it)."""
        return self.cfg.commands_topic, self.partition

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._presence is not None:
            self._presence.close()  # leaves the group: kafka status sees it at once
            self._presence = None
        self._producer = None

    def _close_bounded(self, seconds: float = 30.0) -> None:
        """Close the clients in a thread of their own, within ``seconds``.

        After a broker restart librdkafka can block in a consumer's close or a client's
        destruction (waiting on a broker reference that never drops): the governor leaves
        such clients behind, named in a ``governor.abandon_clients`` line, and starts again
        with new ones (whose ``init_transactions`` fences the old producer)."""
        consumer, presence, producer = self._consumer, self._presence, self._producer
        self._consumer = self._presence = self._producer = None

        def shut() -> None:
            nonlocal consumer, presence, producer
            for c in (consumer, presence):
                if c is not None:
                    try:
                        c.close()
                    except (KafkaException, RuntimeError) as exc:
                        _log.warning(
                            "governor.close_failed", partition=self.partition, error=str(exc)
                        )
            consumer = presence = producer = None  # destroyed here, not in the governor's thread

        try:
            _bounded(shut, seconds)
        except _Stuck:
            _log.warning(
                "governor.abandon_clients",
                partition=self.partition,
                reason=f"closing the old clients did not return within {seconds:g}s",
            )

    # -- the loop -------------------------------------------------------------------------------

    def run(self, *, idle_exit: float | None = None, max_commands: int | None = None) -> int:
        """Decide until stopped (or idle for ``idle_exit`` s, or ``max_commands`` decided)."""
        if self._consumer is None:
            self.start()
        decided = 0
        idle_since = time.monotonic()
        while not self._stop:
            try:
                n = self.step()
            except GovernorFenced:
                raise
            except (KafkaException, StorageError) as exc:  # broker away: back off, rebuild
                _log.warning("governor.retry", partition=self.partition, error=str(exc))
                time.sleep(1.0)
                self._restart_quietly()
                continue
            decided += n
            if n:
                idle_since = time.monotonic()
            elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                break
            if max_commands is not None and decided >= max_commands:
                break
        return decided

    def step(self) -> int:
        """One transaction: consume a batch, decide it, produce decisions, commit.

        A revision-1 decision the decisions topic cannot take stops the governor with a
        :class:`ConfigError` saying what to do, after committing the decisions before it.
        """
        consumer = self._consumer
        assert consumer is not None and self._producer is not None
        if self._presence is not None:
            self._presence.poll(0)  # a loop stuck past max.poll.interval.ms leaves the group
        msgs = consumer.consume(num_messages=self.batch_size, timeout=self.batch_ms / 1000)
        msgs = [m for m in msgs if self._usable(m)]
        if not msgs:
            return 0
        self._kinds = []
        self._internal = 0
        decided, stuck = self._decide(msgs)
        appended = [int(m.timestamp()[1]) for m in msgs[: len(decided)]]
        if decided and not self._commit(msgs[len(decided) - 1], decided, appended):
            return 0  # aborted: state and position were rebuilt from what is committed
        if stuck is not None:
            raise stuck
        return len(decided)

    def _decide(self, msgs: list[Any]) -> tuple[list[tuple[str, bytes]], ConfigError | None]:
        """Decide a batch in order: (graph, decision record) each, until one cannot be written."""
        out: list[tuple[str, bytes]] = []
        i, n = 0, len(msgs)
        while i < n:
            key = msgs[i].key()
            graph = graph_of(key, self.states)
            st = self.states.get(graph)
            if st is None:  # a key of no graph here: routed alone (revision 6: the bucket)
                m = msgs[i]
                graph, d = route(
                    self.states,
                    key,
                    m.value() or b"",
                    int(m.offset() or 0),
                    m.timestamp()[1],
                    decide,
                    partition=self.partition,
                    operator=self.cfg.operator,
                )
                raw = encode_decision(d)  # revision >= 2 (a fresh state): it fits
                st = self.states[graph]
                evolve(st, d, st.decisions, raw)
                self._kinds.append(d["kind"])
                if d["reason"] == Reason.INTERNAL_ERROR:
                    self._internal_error(graph, d)
                out.append((graph, raw))
                i += 1
                continue
            j = i + 1
            while j < n and msgs[j].key() == key:  # a run of one graph's commands: one call
                j += 1
            run = [
                LogRecord(int(x.offset() or 0), x.timestamp()[1], x.value() or b"")
                for x in msgs[i:j]
            ]
            limit = self.record_limit - len(graph.encode("utf-8")) - _FRAMING
            ds, raws = decide_batch(
                st,
                run,
                st.decisions,
                None,
                partition=self.partition,
                limit=limit,
                operator=self.cfg.operator,
            )
            for d, raw in zip(ds, raws, strict=True):
                self._kinds.append(d["kind"])
                if d["reason"] == Reason.INTERNAL_ERROR:
                    self._internal_error(graph, d)
                out.append((graph, raw))
            i += len(ds)
            if len(ds) == len(run):
                continue
            # the next command's decision is too large for the decisions topic
            m = msgs[i]
            value, offset, now = m.value() or b"", int(m.offset() or 0), m.timestamp()[1]
            d = decide(st, value, offset, now, partition=self.partition, operator=self.cfg.operator)
            raw = encode_decision(d)
            if graph not in self.upgrade_oversized:
                return out, self._oversized(graph, offset, d, len(raw))
            d = decide(
                st,
                value,
                offset,
                now,
                rules=CURRENT,
                partition=self.partition,
                operator=self.cfg.operator,
            )
            raw = encode_decision(d)
            _log.warning(
                "governor.upgraded_oversized",
                partition=self.partition,
                graph=graph,
                offset=offset,
                reason=d["reason"],
            )
            evolve(st, d, st.decisions, raw)
            self._kinds.append(d["kind"])
            out.append((graph, raw))
            i += 1
        return out, None

    def _internal_error(self, graph: str, d: Decision) -> None:
        """A rule failed on a command: recorded as a rejection, logged and counted."""
        self._internal += 1
        _log.error(
            "governor.internal_error",
            partition=self.partition,
            graph=graph,
            offset=d["input_offset"],
            command_id=d["command_id"],
            detail=d["detail"],
        )

    def _oversized(self, graph: str, offset: int, d: Decision, size: int) -> ConfigError:
        """The error that stops the governor at a decision it cannot write (revision 1)."""
        _log.error(
            "governor.stuck", partition=self.partition, graph=graph, offset=offset, bytes=size
        )
        return ConfigError(
            f"governor of partition {self.partition} stopped at "
            f"{self.cfg.commands_topic}[{self.partition}]@{offset}: graph {graph!r} decides "
            f"under rules revision {d['rules']}, where this command's decision takes {size} "
            f"bytes and {self.cfg.decisions_topic} takes at most {self.record_limit}; revision "
            f"{d['rules']} has no too_large rejection, so the partition cannot go past it. To "
            f"record it as a too_large rejection, restart the governor with "
            f"--upgrade-oversized {graph}: the graph then decides under rules revision {CURRENT} "
            f"from that record on, as after an upgrade_rules (revision {CURRENT} decides only "
            f"graphs placed on their partition: claimgraph kafka place adopts it)"
        )

    def _commit(self, last: Any, decided: list[tuple[str, bytes]], appended: list[int]) -> bool:
        """Produce the decisions and the input position in one transaction (False: aborted).

        Counters and ``last_batch`` change only once the transaction has committed."""
        consumer, producer = self._consumer, self._producer
        assert consumer is not None and producer is not None
        delivered: list[tuple[str, int]] = []
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                failures.append(err)
            else:
                delivered.append((msg.key().decode("utf-8"), msg.offset()))

        try:
            producer.begin_transaction()
            for graph, value in decided:
                self._produce(producer, graph, value, on_delivery)
            positions = [
                TopicPartition(
                    self.cfg.commands_topic,
                    self.partition,
                    int(last.offset() or 0) + 1,
                    metadata=self.owner,
                )
            ]
            group = consumer.consumer_group_metadata()
            _bounded(lambda: producer.send_offsets_to_transaction(positions, group, 15), 30)
            _bounded(lambda: producer.commit_transaction(30), 45)
        except _Stuck as exc:
            self._abandon(str(exc))
            return False
        except KafkaException as exc:
            self._refuse_size(exc, failures)
            self._recover(exc)
            return False
        if failures or len(delivered) != len(decided):
            # cannot happen after a successful commit; treat as a broken transaction
            self._recover(
                KafkaException(KafkaError(KafkaError._FAIL, f"delivery failed: {failures[:1]}"))
            )
            return False
        for graph, offset in delivered:
            offsets = self.states[graph].offsets
            if offsets is not None:  # None: the bucket of records of no graph (accepts nothing)
                offsets.append(offset)
        self._fatal_restarts = 0
        self.stats.transactions += 1
        self.stats.commands += len(decided)
        by = self.stats.decisions_by_kind
        assert by is not None
        for kind in self._kinds:
            by[kind] = by.get(kind, 0) + 1
        self.stats.internal_errors += self._internal
        self.position = int(last.offset() or 0) + 1
        self.last_batch = CommittedBatch(self._kinds, appended, time.time())
        self._last = (delivered[-1][1], decided[-1][1])
        self._since_checkpoint += len(decided)
        if self.checkpoint_every is not None and self._since_checkpoint >= self.checkpoint_every:
            self.checkpoint()
        gc.freeze()  # the folded state is long-lived: keep it out of full collections
        if self.on_batch is not None:
            self.on_batch(self, len(decided))
        return True

    def _refuse_size(self, exc: KafkaException, failures: list[KafkaError]) -> None:
        """A record the decisions topic refused for its size is not retried: abort and stop
        (the topic's max.message.bytes was lowered below what kafka init set)."""
        errors = [*failures, *(a for a in exc.args[:1] if isinstance(a, KafkaError))]
        if not any(e.code() in _SIZE_ERRORS for e in errors):
            return
        producer = self._producer
        assert producer is not None
        with contextlib.suppress(_Stuck, KafkaException):  # else the next governor aborts it
            _bounded(lambda: producer.abort_transaction(30), 45)
        _log.error("governor.stuck", partition=self.partition, error=str(exc))
        raise ConfigError(
            f"{self.cfg.decisions_topic} refused a decision for its size ({exc}); the governor "
            f"stops instead of retrying it: run claimgraph kafka init to check the topics"
        )

    def checkpoint(self) -> Path | None:
        """Snapshot the folded states after the newest committed decision (None: nothing yet)."""
        if self.checkpoints is None or self._last is None:
            return None
        from claimgraph.projections.checkpoints import save_states

        offset, record = self._last
        path = save_states(
            self.checkpoints, f"governor-p{self.partition}", self.states, offset, record
        )
        self._since_checkpoint = 0
        _log.info("governor.checkpoint", partition=self.partition, offset=offset)
        return path

    def _produce(
        self,
        producer: Producer,
        graph: str,
        value: bytes,
        cb: Callable[[KafkaError | None, Any], None],
    ) -> None:
        while True:
            try:
                producer.produce(
                    self.cfg.decisions_topic,
                    value=value,
                    key=graph.encode("utf-8"),
                    partition=self.partition,
                    on_delivery=cb,
                )
                return
            except BufferError:
                producer.poll(0.05)

    def _usable(self, m: Any) -> bool:
        err = m.error()
        if err is None:
            return True
        if err.code() == KafkaError._PARTITION_EOF:
            return False
        if err.fatal():
            raise GovernorFenced(f"consumer failed: {err.str()}")
        _log.warning("governor.consumer_error", error=err.str())
        return False

    def _recover(self, exc: KafkaException) -> None:
        """Abort the transaction, and rebuild state and position from what is committed.

        A fence (a newer governor took the partition) stops this one. Any other fatal error
        leaves only this producer unusable (librdkafka raises INVALID_TXN_STATE after a broker
        restart): the governor drops it and starts again, and the new producer's
        ``init_transactions`` aborts what the old one left open. At most
        ``FATAL_RESTARTS`` of those in a row without a commit between them: then it stops."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        producer = self._producer
        assert producer is not None
        if err is not None and _fenced(err):
            _log.error(
                "governor.fenced",
                partition=self.partition,
                owner=self.owner,
                error=err.str(),
            )
            raise GovernorFenced(f"governor for partition {self.partition} was fenced: {err.str()}")
        if err is not None and err.fatal():
            self._fatal_restarts += 1
            if self._fatal_restarts > FATAL_RESTARTS:
                _log.error("governor.failed", partition=self.partition, error=err.str())
                raise GovernorFenced(
                    f"governor for partition {self.partition} failed fatally "
                    f"{self._fatal_restarts} times in a row without a commit: {err.str()}"
                )
            self.stats.aborts += 1
            _log.warning(
                "governor.producer_failed",
                partition=self.partition,
                error=err.str(),
                restart=self._fatal_restarts,
            )
            self._producer = None  # unusable: the next one's init_transactions aborts its txn
            self._restart_quietly()
            return
        self.stats.aborts += 1
        _log.warning("governor.abort", partition=self.partition, error=str(exc))
        try:
            _bounded(lambda: producer.abort_transaction(30), 45)
        except _Stuck:
            self._abandon("abort_transaction did not return")
            return
        except KafkaException as again:
            err2 = again.args[0] if again.args else None
            if isinstance(err2, KafkaError) and err2.fatal():
                self._recover(again)  # a fence stops; any other fatal error: a new producer
                return
            # the broker may be away; a new producer with the same transactional.id will
            # abort the open transaction when it initialises
        self._restart_quietly()

    def _abandon(self, why: str) -> None:
        """A transactional call is stuck in librdkafka (it can ignore its timeout when the
        coordinator goes away): leave that producer behind; the new one's
        ``init_transactions`` fences it and aborts its open transaction."""
        self.stats.aborts += 1
        _log.warning("governor.abandon_producer", partition=self.partition, reason=why)
        self._producer = None
        self._restart_quietly()

    def _restart_quietly(self) -> None:
        """Drop clients and state, then start again from what is committed (retrying)."""
        self._close_bounded()
        while not self._stop:
            try:
                self.start()
                return
            except GovernorFenced:
                raise
            except (KafkaException, StorageError, ClaimgraphError) as exc:
                _log.warning("governor.retry", partition=self.partition, error=str(exc))
                time.sleep(1.0)


# Fatal producer errors (not fences) a governor recovers from in a row, with a new producer,
# before it stops: a broker restart costs one; a producer failing at every start is a fault.
FATAL_RESTARTS = 3
_FENCE_CODES = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def _fenced(err: KafkaError) -> bool:
    """Whether the error says a newer producer of the same transactional id took over."""
    return err.code() in _FENCE_CODES or (err.fatal() and "fenced" in err.str().lower())


def _decoded(logged: bytes) -> Decision | None:
    """A logged decision (None if it cannot be read: the replay then reports a mismatch)."""
    try:
        return decode_decision(logged)
    except DecodeError:
        return None


def _rules_of(logged: bytes) -> int | None:
    """The rules revision a logged decision names."""
    d = _decoded(logged)
    return None if d is None else d["rules"]


def verify_partition(
    cfg: KafkaConfig,
    partition: int,
    progress: Callable[[int, int], None] | None = None,
    *,
    graph: str | None = None,
) -> tuple[int, int]:
    """Re-run the governor over a commands partition; compare with the decisions partition.

    Transactions are contiguous runs of offsets in the decisions partition, so the offsets
    the live governor knew when it decided each command are rebuilt exactly. Each record is
    routed as the governor routes it (:func:`~claimgraph.core.governor.placement.route`, with
    the configured operator) and must land in the graph its decision is keyed by. With
    ``graph``, the partition must also hold an accepted placement of that graph. Returns
    (commands, decisions); raises IntegrityError naming the first differing version.
    """
    commands = read_partition(cfg, cfg.commands_topic, partition, 0, None, 30.0)
    decisions = read_partition(cfg, cfg.decisions_topic, partition, 0, None, 30.0)
    tp = TopicPartition(cfg.commands_topic, partition)
    c = Consumer(
        cfg.client(
            **{"group.id": f"{cfg.prefix}-governor-p{partition}", "enable.auto.commit": False}
        )
    )
    try:
        committed = c.committed([tp], timeout=30)[0].offset
    finally:
        c.close()
    decided = [x for x in commands if x[0].offset < committed] if committed >= 0 else []
    if len(decisions) != len(decided):
        raise IntegrityError(
            f"partition {partition}: {len(decided)} decided commands but "
            f"{len(decisions)} decisions",
            None,
        )
    chains: dict[bytes | None, ChainChecker] = {}  # first the hash chain, one per graph
    for (cmd, _), (dec, dkey) in zip(decided, decisions, strict=True):
        logged = _decoded(dec.value)
        if logged is not None:
            chains.setdefault(dkey, ChainChecker()).add(dec.offset, dec.value, logged, cmd.value)
    states: dict[str, GraphState] = {}
    pending: list[tuple[str, int]] = []
    prev_offset: int | None = None
    for i, ((cmd, key), (dec, dkey)) in enumerate(zip(decided, decisions, strict=True)):
        if prev_offset is not None and dec.offset != prev_offset + 1:
            for done, off in pending:  # a new transaction: the previous one had committed
                offs = states[done].offsets
                if offs is not None:
                    offs.append(off)
            pending = []
        prev_offset = dec.offset
        rules = _rules_of(dec.value)
        routed, d = route(  # the specification checks the log, whichever core wrote it
            states,
            key,
            cmd.value,
            cmd.offset,
            cmd.timestamp,
            python_decide,
            partition=partition,
            operator=cfg.operator,
            rules=rules,
        )
        same = python_encode_decision(d) == dec.value or same_decision(dec.value, d)
        if dkey != routed.encode("utf-8") or not same:
            raise IntegrityError(
                f"decision at version {dec.offset} (partition {partition}) "
                "differs from the governor's replay",
                dec.offset,
            )
        st = states[routed]
        st.evolve(d, st.decisions, dec.value)
        pending.append((routed, dec.offset))
        if progress is not None and i % 1000 == 0:
            progress(i, len(decided))
    if graph is not None:
        held = states.get(graph)
        if held is None or held.placed != partition:
            raise IntegrityError(
                f"partition {partition} holds no accepted placement of graph {graph!r}: its "
                "decisions there are not the graph's (the registry may name another partition "
                "than the one the operator placed it on)",
                None,
            )
    return len(decided), len(decisions)
