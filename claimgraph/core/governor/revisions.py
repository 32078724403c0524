"""Governor rules revisions: fixing a rule never changes how an old log replays (pure).

Every decision records the rules revision that made it (``rules``). A graph decides under
the revision of its last decision; a new, empty graph under :data:`CURRENT`. A newer revision
takes effect only from an admin's ``upgrade_rules`` command in the log, so a graph written
under revision 1 keeps deciding under revision 1 until its admin upgrades it. The rules of
every revision stay in the code: a rule that changed reads the revision of the decision it
is filling (``at_least(d, 2)``) and keeps its old branch, and ``verify`` re-decides each
command under the revision its logged decision names — as deterministic workflow engines
keep old code paths for replay.

Revisions:

1. The rules of every decision written before revisions were recorded.
2. The decisions log is a hash chain (each decision carries the SHA-256 of the command it
   decides and the chain hash before it); the hostile-input and fail-closed fixes of the
   trust issue (see :data:`CHANGES`). The ``upgrade_rules`` decision that moves a graph to 2
   starts the chain, anchored on every decision before it.
3. One declared input domain: every field of every command is checked against its domain in
   the command catalogue before any rule runs (times end at year 9999), and a rule that fails
   unexpectedly is a recorded ``internal_error`` rejection (see :data:`CHANGES`).
4. Fail closed for disagreement (DESIGN §2): an undisputed claim in a fail-closed domain is
   decided as in any domain; conflicts that meet merge.
5. Runs are explicit: a ``read_blocked`` without a run (reads outside an explicit run) counts
   once per (reader, conflict), so an agent polling a quarantined slot is not an escalation.
6. Placement is an operator's act: a ``place`` by anyone but the operator the governor is
   configured with is rejected ``not_operator`` (and is signed when signatures are required);
   a record whose key is not a graph with state on the partition is decided in one shared
   bucket that remembers nothing of it.
"""

from __future__ import annotations

from claimgraph.core.model import Decision

__all__ = ["CHANGES", "CURRENT", "LEGACY", "at_least"]

LEGACY = 1
CURRENT = 6

# What each revision changed, for `claimgraph rules show` and the docs.
CHANGES: dict[int, tuple[str, ...]] = {
    1: ("the rules before revisions were recorded",),
    2: (
        "decisions carry the command's SHA-256 and the hash chain before them (tamper-evident)",
        "publish_schema: once a graph has a schema, the publisher must be an admin before its "
        "document is parsed; documents are parsed within YAML bounds (aliases, nodes, depth) "
        "and CEL rules within theirs (characters, nesting)",
        "signatures are required when the schema says principals.signatures: required, not "
        "while a key is active; with no active key, only an admin's register_key is decided",
        "read_blocked counts once per (authenticated reader, run, conflict), only from a run "
        "pinned at a version where the conflict was open (pinned_version); count is not trusted",
        "fail closed by every route: in a fail-closed domain only a human moves a decision slot "
        "off its safe value (resolve, merge, last-write-wins, a plain claim), and a denial of "
        "the safe value is not safe; an exit falls back only to a claim of the safe value",
        "a writer's new claim replaces its own earlier claims in the conflict it joins; a "
        "conflict whose remaining claims all agree settles (conflict_settled)",
        "Kafka: a command of a graph not placed on the partition its record is in is rejected "
        "(misrouted); records without a key, or whose key is not a graph name, too",
        "a decision whose record would exceed LIMITS['decision_bytes'] is replaced by a "
        "rejection (too_large) that keeps the envelope and the chain, with no effect",
    ),
    3: (
        "every field of every command is checked against its declared domain (type, range, "
        "length, item count; claimgraph.core.commands) before any rule runs: a field outside "
        "it is rejected invalid_field (field_too_large, invalid_id) naming the field and the "
        "bound; times (asserted_at, expires_at) lie in [0, 253402300799999] ms (year 9999)",
        "a rule that fails unexpectedly is recorded as rejected/internal_error naming the rule "
        "and the exception's class, with no effect (under every revision: a raise never "
        "produced a decision)",
    ),
    4: (
        "fail closed for disagreement: in a fail-closed domain a claim nobody disputes (no "
        "other writer's claim disagrees with it on its edge, in its slots or in the conflict it "
        "joins) is decided as in any domain — a first automated APPROVE is accepted, an owner "
        "withdraws or changes its own claim; only a disputed claim that would move a decision "
        "off its safe value is held for a human, by every route as before",
        "conflicts that meet merge: a claim touching several open conflicts joins the oldest, "
        "and the others close as 'merged into <id>' (recorded as merge exits) instead of the "
        "claim being rejected conflict_overlap; a command naming a merged conflict is rejected "
        "naming the one it was merged into",
    ),
    5: (
        "read_blocked without a run_id (reads outside an explicit run, reported at the version "
        "read as pinned_version) counts once per (authenticated reader, conflict) and never "
        "as a run (escalate_after_runs); under revisions 2 to 4 it is rejected invalid_field",
    ),
    6: (
        "Kafka: a place is accepted only from the operator the governor is configured with "
        "(never read from a topic producers can write); anyone else's is rejected "
        "not_operator, and a place is no longer exempt from principals.signatures: required",
        "Kafka: a record whose key is not a graph already decided on the partition, and whose "
        "decision is a rejection (anything but an operator's place of it), is decided in one "
        "shared bucket graph ('_unplaced') with its command id not remembered, so distinct "
        "junk keys leave no lasting per-key state; under revisions 2 to 5 each key became a "
        "graph of its own",
    ),
}


def at_least(d: Decision, revision: int) -> bool:
    """Whether the decision being made is under ``revision`` or a newer one."""
    return d["rules"] >= revision
