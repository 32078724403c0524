"""Who calls: the principal every surface resolves its caller to (pure data, no I/O).

A :class:`Principal` is an agent, the tasks it may act in, its roles, and how that was
proved (a token, the trusted local owner, a served API); the service layer
(:mod:`claimgraph.service.access`) checks and limits every call as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from claimgraph.core.model import LIMITS
from claimgraph.core.schema import Pattern

__all__ = ["HOW", "ROLES", "STATUS", "Principal", "Resolve", "clean"]

ROLES = ("admin", "resolver")
HOW = ("token", "local-owner", "server")  # how a principal was proved
STATUS = LIMITS["id"]  # characters of a run's end status (it goes into the runs log)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who calls: an agent, the tasks it may act in, its roles, and how that was proved.

    ``how`` is ``token`` (a bearer token: checked here), ``local-owner`` (``--agent`` over a
    data directory, or the writer socket's peer: trusted, the governor judges) or ``server``
    (a graph behind a served API, which checks and counts itself).
    """

    agent: str
    tasks: tuple[str, ...] = ("*",)
    roles: frozenset[str] = frozenset()
    how: str = "token"

    def may_act_in(self, task: str) -> bool:
        return any(Pattern.of(t).matches(task) for t in self.tasks)

    @property
    def admin(self) -> bool:
        return "admin" in self.roles

    @property
    def resolver(self) -> bool:
        return "resolver" in self.roles or self.admin

    def has_role(self, role: str) -> bool:
        return role in self.roles or self.admin

    @property
    def checked(self) -> bool:
        """Whether roles, tasks and the declared agent are checked here (a token)."""
        return self.how == "token"

    @property
    def default_task(self) -> str:
        """The task it acts in unless told: its one literal task, or '' (none to choose)."""
        literal = [t for t in self.tasks if not any(c in t for c in "*?[")]
        return literal[0] if len(self.tasks) == 1 and literal else ""

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "tasks": list(self.tasks), "roles": sorted(self.roles)}


Resolve = Callable[[str | None], Principal | None]  # a token (or None) → its principal


def clean(value: str, limit: int = LIMITS["id"]) -> str:
    """Text safe to put in a record: valid UTF-8, bounded."""
    return value.encode("utf-8", "replace").decode("utf-8")[:limit]
