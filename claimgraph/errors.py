"""The one exception tree of claimgraph; HTTP and the CLI map it to status and exit codes.

ClaimgraphError                 root: every error we raise on purpose
├── ConfigError                 bad options, missing data directory, wrong graph
├── SchemaError                 a graph schema (policy YAML) is invalid; carries file and path
├── InputError                  a command given at the edge (JSON, CLI flags) is malformed
├── DecodeError                 bytes on a log are not a record we know (wire contract)
├── VersionError                a read at a version that cannot be served
│   ├── VersionNotYetAvailable  above head, and the wait timed out
│   └── VersionPruned           below the retention horizon (never a silently wrong answer)
├── UnknownSlotError            a read hit a quarantined slot whose policy is on_unknown: halt
├── IntegrityError              verify/audit found a difference; names the first version
│   └── CorruptionError         stored bytes fail a checksum or are cut short; names the file
├── StorageError                the local store is locked, corrupt or missing
│   └── DiskFullError           a write failed for lack of space; nothing was decided
├── NotFoundError               no such run, claim or conflict (HTTP 404)
└── AuthError                   the HTTP API refused the caller's identity (401/403); has reason
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ClaimgraphError",
    "ConfigError",
    "CorruptionError",
    "DecodeError",
    "DiskFullError",
    "InputError",
    "IntegrityError",
    "NotFoundError",
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


class DecodeError(ClaimgraphError):
    """Bytes are not a record of the wire contract. ``reason`` is a machine-readable code."""

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
    """The local store is locked by another process, corrupt or missing."""

    exit_code = 8


class NotFoundError(ClaimgraphError):
    """No such run, claim or conflict."""

    exit_code = 9


class AuthError(ClaimgraphError):
    """The HTTP API refused the caller: no or unknown token (401), or not allowed (403).

    ``reason`` is the reason code the refusal was recorded with (``unauthenticated``,
    ``agent_mismatch``, ``task_not_allowed``, ``not_admin``, ``not_resolver``).
    """

    exit_code = 10

    def __init__(self, reason: str, detail: str, status: int = 403) -> None:
        self.reason = reason
        self.detail = detail
        self.status = status
        super().__init__(f"{reason}: {detail}")


class CorruptionError(IntegrityError):
    """Stored bytes failed a checksum or are cut short; ``path`` names the file or directory."""

    def __init__(self, message: str, path: str, version: int | None = None) -> None:
        self.path = path
        super().__init__(message, version)


class DiskFullError(StorageError):
    """A write failed for lack of disk space (nothing was decided); ``path`` names the store."""

    def __init__(self, message: str, path: str) -> None:
        self.path = path
        super().__init__(message)
