"""Every catalogued write as a typed method over ``write``, for graphs and runs.

Generated from the write catalogue (:mod:`claimgraph.core.writes`) by ``tools/gen_reads.py``:
do not edit; change the catalogue and regenerate (a test fails while they differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from claimgraph.service.api import NodeLike, Receipt

__all__ = ["CatalogueWrites", "RunWrites"]

_ = (Any, Literal, Sequence)  # the signatures below name them


class CatalogueWrites:
    """Each write of the catalogue as a typed method: ``write(name, ...)``."""

    def write(self, name: str, /, **params: Any) -> Any:
        """The one write operation (the subclass answers it)."""
        raise NotImplementedError

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        polarity: Literal["assert", "deny"] = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert (or with polarity='deny' deny) an edge."""
        return cast(
            "Receipt",
            self.write(
                "claim",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                agent=agent,
                task=task,
                polarity=polarity,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                run_id=run_id,
                command_id=command_id,
            ),
        )

    def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert that an edge holds (see claim)."""
        return cast(
            "Receipt",
            self.write(
                "assert_",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                agent=agent,
                task=task,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                run_id=run_id,
                command_id=command_id,
            ),
        )

    def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Deny that an edge holds (see claim)."""
        return cast(
            "Receipt",
            self.write(
                "deny",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                agent=agent,
                task=task,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                run_id=run_id,
                command_id=command_id,
            ),
        )

    def retract(
        self,
        claim_id: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        reason: str = "",
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Withdraw one's own claim (retirement: gone from head, readable before), in the run
        run_id names when given."""
        return cast(
            "Receipt",
            self.write(
                "retract",
                claim_id=claim_id,
                agent=agent,
                task=task,
                reason=reason,
                run_id=run_id,
                command_id=command_id,
            ),
        )

    def resolve(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        winner: str | None,
        resolver: str = "human",
        rationale: str = "",
        inputs: str = "",
        command_id: str | None = None,
    ) -> Receipt:
        """A resolver's verdict: winner (a claim id) or None to reject every claim; inputs (JSON
        text) records what the resolver saw and decided on."""
        return cast(
            "Receipt",
            self.write(
                "resolve",
                conflict_id=conflict_id,
                agent=agent,
                task=task,
                winner=winner,
                resolver=resolver,
                rationale=rationale,
                inputs=inputs,
                command_id=command_id,
            ),
        )

    def escalate(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        reason: str = "",
        resolver: str = "human",
        command_id: str | None = None,
    ) -> Receipt:
        """Hand a conflict to a person (a resolver's move): it stays quarantined, escalated."""
        return cast(
            "Receipt",
            self.write(
                "escalate",
                conflict_id=conflict_id,
                agent=agent,
                reason=reason,
                resolver=resolver,
                command_id=command_id,
            ),
        )

    def read_blocked(
        self,
        conflict_id: str,
        count: int = 1,
        *,
        agent: str | None = None,
        task: str | None = None,
        run_id: str | None = None,
        pinned_version: int | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Report reads of a run that hit a quarantined slot (exit conditions count them): from
        rules revision 2 on a report counts only from a run pinned where the conflict was open,
        once per (reader, run); from revision 5 a report without a run counts once per (reader,
        conflict). task is the run's."""
        return cast(
            "Receipt",
            self.write(
                "read_blocked",
                conflict_id=conflict_id,
                count=count,
                agent=agent,
                task=task,
                run_id=run_id,
                pinned_version=pinned_version,
                command_id=command_id,
            ),
        )

    def publish_schema(
        self,
        document: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        source: str = "<inline>",
        command_id: str | None = None,
    ) -> Receipt:
        """Publish a graph schema document (YAML) as agent (an admin)."""
        return cast(
            "Receipt",
            self.write(
                "publish_schema",
                document=document,
                agent=agent,
                task=task,
                source=source,
                command_id=command_id,
            ),
        )

    def grant(
        self,
        grantee_agent: str,
        edge_type: str,
        *,
        agent: str | None = None,
        grantee_task: str = "*",
        expires_at: int | str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Grant extra write scope (admin only), optionally until expires_at (log time)."""
        return cast(
            "Receipt",
            self.write(
                "grant",
                grantee_agent=grantee_agent,
                edge_type=edge_type,
                agent=agent,
                grantee_task=grantee_task,
                expires_at=expires_at,
                command_id=command_id,
            ),
        )

    def revoke(
        self,
        grant_id: str,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Revoke a grant (admin only)."""
        return cast(
            "Receipt",
            self.write(
                "revoke",
                grant_id=grant_id,
                agent=agent,
                command_id=command_id,
            ),
        )

    def register_key(
        self,
        key_id: str,
        key_agent: str,
        public_key: bytes,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Register an Ed25519 public key (admin only); the graph then requires signatures."""
        return cast(
            "Receipt",
            self.write(
                "register_key",
                key_id=key_id,
                key_agent=key_agent,
                public_key=public_key,
                agent=agent,
                command_id=command_id,
            ),
        )

    def revoke_key(
        self,
        key_id: str,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Revoke a signing key (admin only)."""
        return cast(
            "Receipt",
            self.write(
                "revoke_key",
                key_id=key_id,
                agent=agent,
                command_id=command_id,
            ),
        )

    def upgrade_rules(
        self,
        to: int,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Move the graph to governor rules revision to from now on (admin only); decisions already
        made keep the revision they were made under."""
        return cast(
            "Receipt",
            self.write(
                "upgrade_rules",
                to=to,
                agent=agent,
                command_id=command_id,
            ),
        )

    def erase(
        self,
        claim_id: str,
        *,
        agent: str | None = None,
        reason: str,
        command_id: str | None = None,
    ) -> Receipt:
        """Erase a claim's payload (evidence, reasoning, properties) from every read, for privacy
        (admin only). Not for correcting wrong data: retract or resolve for that."""
        return cast(
            "Receipt",
            self.write(
                "erase",
                claim_id=claim_id,
                agent=agent,
                reason=reason,
                command_id=command_id,
            ),
        )


class RunWrites:
    """Each write a run offers as a typed method, as the run's agent in its run."""

    def write(self, name: str, /, **params: Any) -> Any:
        """The one write operation (the subclass answers it)."""
        raise NotImplementedError

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        polarity: Literal["assert", "deny"] = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert (or with polarity='deny' deny) an edge.

        As the run's agent, in its task and run, based on its pinned version unless given."""
        return cast(
            "Receipt",
            self.write(
                "claim",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                polarity=polarity,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                command_id=command_id,
            ),
        )

    def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert that an edge holds (see claim).

        As the run's agent, in its task and run, based on its pinned version unless given."""
        return cast(
            "Receipt",
            self.write(
                "assert_",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                command_id=command_id,
            ),
        )

    def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Deny that an edge holds (see claim).

        As the run's agent, in its task and run, based on its pinned version unless given."""
        return cast(
            "Receipt",
            self.write(
                "deny",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                confidence=confidence,
                evidence=evidence,
                reasoning=reasoning,
                asserted_at=asserted_at,
                based_on_version=based_on_version,
                properties=properties,
                command_id=command_id,
            ),
        )

    def retract(
        self,
        claim_id: str,
        *,
        reason: str = "",
        command_id: str | None = None,
    ) -> Receipt:
        """Withdraw one's own claim (retirement: gone from head, readable before), in the run
                run_id names when given.

        As the run's agent, in its task and run."""
        return cast(
            "Receipt",
            self.write(
                "retract",
                claim_id=claim_id,
                reason=reason,
                command_id=command_id,
            ),
        )
