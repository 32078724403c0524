"""The one exception tree of claimgraph; the edges map each family to an exit code and a status.

Every error claimgraph raises on purpose is a :class:`ClaimgraphError`. The root's children
are the *families*: each has an exit code of its own (``exit_code``, which the CLI's ``main``
exits with) and an HTTP status (mapped in ``claimgraph.http.problems``). A member shares its
family's exit code and may narrow the status. The tree below is tested against these classes,
and the docs' exit-code page (docs/reference/exit-codes.md) is generated from it.

                              exit  HTTP
ClaimgraphError                  1  500      root; nothing is raised as the root itself
├── ConfigError                  2  422      bad options, missing data directory, wrong graph
├── SchemaError                  3  422      a graph schema (policy YAML) is invalid; file, path
├── InputError                   4  422      a command given at the edge is malformed
│   └── LimitError               4  413/429  it exceeds a documented limit (size, count, slots)
├── VersionError                 5  409      a read at a version that cannot be served
│   ├── VersionNotYetAvailable   5  409      above head, and the wait timed out
│   └── VersionPruned            5  410      below the retention horizon (never a wrong answer)
├── UnknownSlotError             6  409      a read hit a quarantined slot whose policy is halt
├── IntegrityError               7  500      verify, audit or a replay found a difference
│   └── CorruptionError          7  500      stored bytes fail a checksum or are cut short
├── StorageError                 8  503      a store or broker is locked, corrupt, missing or away
│   └── DiskFullError            8  507      a write failed for lack of space; nothing decided
├── NotFoundError                9  404      no such claim, conflict, run, pin, checkpoint, schema
│   └── RunNotFound              9  404      no run with that id in the runs log
├── AuthError                   10  401/403  the HTTP API refused the caller's identity
├── FencedError                 11  503      another process took over what this one wrote
│   └── GovernorFenced          11  503      another governor owns the partition now
├── DecodeError                 12  422      bytes on a log are not a record of the wire contract
└── ResolverError               13  500      a resolver reached no verdict (its chain moves on)
    ├── RuleError               13  500      a CEL rule could not be evaluated
    └── ArbiterError            13  500      the arbitration agent failed or gave no verdict

Not in the tree, on purpose: control-flow signals that never leave their module —
``core.governor.base.Refusal`` (a rule refusing a command: it becomes a ``rejected``
decision), ``streams.kafka._Stuck`` (a librdkafka call past its bound: the producer is
abandoned) and ``core.rules._OverBudget`` (a CEL evaluation past its limits, raised through
celpy as a BaseException so celpy cannot swallow it; it becomes a :class:`RuleError`).
``core.avro``'s ``AvroDecodeError`` and ``UnsupportedSchema`` are the codec's own, and
``core.wire`` turns the first into :class:`DecodeError`.
"""

from __future__ import annotations

__all__ = [
    "ArbiterError",
    "AuthError",
    "ClaimgraphError",
    "ConfigError",
    "CorruptionError",
    "DecodeError",
    "DiskFullError",
    "FencedError",
    "GovernorFenced",
    "InputError",
    "IntegrityError",
    "LimitError",
    "NotFoundError",
    "ResolverError",
    "RuleError",
    "RunNotFound",
    "SchemaError",
    "StorageError",
    "UnknownSlotError",
    "VersionError",
    "VersionNotYetAvailable",
    "VersionPruned",
]


class ClaimgraphError(Exception):
    """Root of every error claimgraph raises on purpose."""

    exit_code = 1


class ConfigError(ClaimgraphError):
    """Bad options or environment: missing data directory, wrong graph name."""

    exit_code = 2


class SchemaError(ClaimgraphError):
    """A graph schema document is invalid.

    ``problems`` lists every problem found as ``(path, message)`` pairs, where ``path`` is the
    location inside the document (``edge_types[1].cardinality``).
    """

    exit_code = 3

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        first = problems[0] if problems else ("", "invalid")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        where = f"{source}: {first[0]}" if first[0] else source
        super().__init__(f"{where}: {first[1]}{more}")

    def report(self) -> str:
        """All problems, one per line."""
        return "\n".join(
            f"{self.source}: {p}: {m}" if p else f"{self.source}: {m}" for p, m in self.problems
        )


class InputError(ClaimgraphError):
    """A command given at the edge (JSON line, CLI flags) is malformed."""

    exit_code = 4


class LimitError(InputError):
    """Input beyond a documented limit (docs/reference/limits.md), refused before the work.

    ``reason`` is the reason code it answers with (``too_large``: 413, a body, a line, a run's
    trace; ``too_many``: 429, more requests, waits or pins at once than one principal may
    hold), ``limit`` the limit's name and ``status`` the HTTP status.
    """

    def __init__(self, reason: str, limit: str, detail: str, status: int = 413) -> None:
        self.reason = reason
        self.limit = limit
        self.detail = detail
        self.status = status
        super().__init__(f"{detail} (limit: {limit})")


class DecodeError(ClaimgraphError):
    """Bytes are not a record of the wire contract. ``reason`` is a machine-readable code."""

    exit_code = 12

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


class VersionError(ClaimgraphError):
    """A read at a version that cannot be served."""

    exit_code = 5


class VersionNotYetAvailable(VersionError):
    """The requested version is above head and did not arrive within the timeout."""

    def __init__(self, requested: int, head: int, timeout: float) -> None:
        self.requested = requested
        self.head = head
        self.timeout = timeout
        super().__init__(
            f"version {requested} is not available: head is {head} (waited {timeout:g}s for it)"
        )


class VersionPruned(VersionError):
    """The requested version is below the retention horizon."""

    def __init__(self, requested: int, horizon: int) -> None:
        self.requested = requested
        self.horizon = horizon
        super().__init__(f"version {requested} was pruned: the horizon is {horizon}")


class UnknownSlotError(ClaimgraphError):
    """A read hit a quarantined slot whose edge type says ``on_unknown: halt``."""

    exit_code = 6

    def __init__(self, what: str, conflict_id: str) -> None:
        self.conflict_id = conflict_id
        super().__init__(f"{what} is unknown (conflict {conflict_id}) and its policy is halt")


class IntegrityError(ClaimgraphError):
    """verify or audit found a difference; ``version`` is the first differing one."""

    exit_code = 7

    def __init__(self, message: str, version: int | None = None) -> None:
        self.version = version
        super().__init__(message)


class StorageError(ClaimgraphError):
    """A store is locked by another process, corrupt or missing, or a broker is away."""

    exit_code = 8


class NotFoundError(ClaimgraphError):
    """No such claim, conflict, escalation, run, pin, checkpoint or schema."""

    exit_code = 9


class RunNotFound(NotFoundError):
    """No run with that id in the runs log."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r} in the runs log (claimgraph runs list)")


class AuthError(ClaimgraphError):
    """The HTTP API refused the caller: no or unknown token (401), or not allowed (403).

    ``reason`` is the reason code (``unauthenticated``, ``agent_mismatch``,
    ``task_not_allowed``, ``not_admin``, ``not_resolver``, ``not_run_owner``); when the
    refusal was recorded, ``version`` and ``decision`` are the refused command's.
    """

    exit_code = 10

    def __init__(
        self,
        reason: str,
        detail: str,
        status: int = 403,
        *,
        version: int | None = None,
        decision: dict[str, object] | None = None,
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.status = status
        self.version = version
        self.decision = decision
        super().__init__(f"{reason}: {detail}")


class FencedError(ClaimgraphError):
    """Another process took over what this one was writing; this one must stop."""

    exit_code = 11


class GovernorFenced(FencedError):
    """Another governor took over this partition (or the transaction is unrecoverable)."""


class ResolverError(ClaimgraphError):
    """A resolver reached no verdict; the resolver chain records why and tries the next."""

    exit_code = 13


class RuleError(ResolverError):
    """A CEL expression could not be evaluated (missing key, wrong type, ...)."""


class ArbiterError(ResolverError):
    """The arbiter failed or answered something that is not a verdict."""


class CorruptionError(IntegrityError):
    """Stored bytes failed a checksum or are cut short; ``path`` names the file or directory."""

    def __init__(self, message: str, path: str = "", version: int | None = None) -> None:
        self.path = path
        super().__init__(message, version)


class DiskFullError(StorageError):
    """A write failed for lack of disk space (nothing was decided); ``path`` names the store."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(message)
