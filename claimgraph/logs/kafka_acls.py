"""The Kafka ACLs each claimgraph process needs: one table, for the docs, the CLI and the tests.

With an authorizer on the cluster (``allow.everyone.if.no.acl.found=false``), each process
runs as its own principal with exactly the grants of its role:

* ``operator`` — ``kafka init``, ``kafka place``, ``kafka status``, ``verify``: administers the
  deployment's topics and is the only one that writes the registry (``PREFIX.placements``).
* ``governor`` — decides one partition: reads commands, writes decisions in transactions
  (``transactional.id`` ``PREFIX-governor-pN``), commits its input offsets to its group.
* ``projector`` — reads decisions into a projection, commits its position to its group.
* ``writer`` — the CLI's writes and reads, and ``serve``: produces commands, reads their
  decisions, writes runs, holds a ``serve`` lease group.
* ``agent`` — an agent that signs and produces its own commands: writes the commands topic,
  nothing else (no registry write, so it cannot re-home a graph).

Consumers that only ``assign()`` partitions (librdkafka still needs a ``group.id`` and looks
up its coordinator, FindCoordinator: Describe on the group) get Describe on the fixed group
names they use; groups that commit offsets or whose members join get Read. Idempotent
producers need no cluster grant: Write on a topic authorises InitProducerId (Kafka 2.8+).

The test suite applies :func:`bindings` of each role on an authorizing broker and runs every
process under it (``tests/test_kafka_acls.py``); the table in ``docs/how-to/kafka.md`` is
:func:`markdown_table`, checked by a test.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "FIXED_GROUPS",
    "ROLES",
    "Grant",
    "bindings",
    "grants",
    "kafka_acls_commands",
    "markdown_table",
]

# consumer groups whose names do not carry the prefix (assign() only: nothing is committed)
FIXED_GROUPS = {
    "reader": "claimgraph-reader",  # read_partition: registry, decisions, verification
    "probe": "claimgraph-probe",  # watermark: the end of a partition
    "client": "claimgraph-client",  # a writer waiting for its decisions
    "lag": "claimgraph-lag",  # serve's projection lag
}


@dataclass(frozen=True, slots=True)
class Grant:
    """Allow ``operations`` on one resource (``topic``, ``group``, ``transactional-id``), by
    ``literal`` name or by ``prefixed`` name; ``name`` may hold ``{prefix}``."""

    resource: str
    name: str
    pattern: str
    operations: tuple[str, ...]
    why: str

    def resolved(self, prefix: str) -> Grant:
        return Grant(
            self.resource,
            self.name.format(prefix=prefix),
            self.pattern,
            self.operations,
            self.why,
        )


def _topic(suffix: str, ops: tuple[str, ...], why: str) -> Grant:
    return Grant("topic", "{prefix}." + suffix, "literal", ops, why)


def _fixed(*which: str) -> list[Grant]:
    return [
        Grant("group", FIXED_GROUPS[w], "literal", ("DESCRIBE",), "assign() only: its coordinator")
        for w in which
    ]


_TABLE: dict[str, list[Grant]] = {
    "operator": [
        Grant(
            "topic",
            "{prefix}.",
            "prefixed",
            ("ALL",),
            "create, grow and check the topics; write layout, placements and place records",
        ),
        Grant(
            "group",
            "{prefix}-governor-p",
            "prefixed",
            ("DESCRIBE",),
            "kafka status: governors' committed offsets and live members",
        ),
        *_fixed("reader", "probe"),
    ],
    "governor": [
        _topic("commands", ("READ",), "its input"),
        _topic("decisions", ("READ", "WRITE", "DESCRIBE_CONFIGS"), "its output, folded at start"),
        _topic("placements", ("READ",), "the layout; membership of its presence group"),
        Grant(
            "group",
            "{prefix}-governor-p",
            "prefixed",
            ("READ",),
            "input offsets committed with each transaction; the presence group",
        ),
        Grant(
            "transactional-id",
            "{prefix}-governor-p",
            "prefixed",
            ("WRITE",),
            "one transactional.id per partition (fences zombies)",
        ),
        *_fixed("reader", "probe"),
    ],
    "projector": [
        _topic("commands", ("DESCRIBE",), "the layout check: the topic is the one init made"),
        _topic("decisions", ("READ",), "its input"),
        _topic("placements", ("READ",), "the registry, verified against decisions"),
        Grant(
            "group",
            "{prefix}-projector-",
            "prefixed",
            ("READ",),
            "its position, committed for Kafka's lag tools",
        ),
        *_fixed("reader", "probe"),
    ],
    "writer": [
        _topic("commands", ("WRITE",), "its commands (idempotent producer)"),
        _topic("decisions", ("READ",), "the decisions of its commands; verification"),
        _topic("placements", ("READ",), "the registry"),
        _topic("runs", ("READ", "WRITE"), "run traces"),
        Grant(
            "group",
            "{prefix}.serve.",
            "prefixed",
            ("READ",),
            "serve's lease: one replica ticks and resolves per graph",
        ),
        *_fixed("reader", "probe", "client", "lag"),
    ],
    "agent": [
        _topic("commands", ("WRITE",), "its own signed commands, and nothing else"),
    ],
}

ROLES: tuple[str, ...] = tuple(_TABLE)


def grants(role: str, prefix: str = "claimgraph") -> list[Grant]:
    """What ``role`` needs in the deployment of topic prefix ``prefix`` (ValueError: no role)."""
    if role not in _TABLE:
        raise ValueError(f"no role {role!r}; roles: {', '.join(ROLES)}")
    return [g.resolved(prefix) for g in _TABLE[role]]


def bindings(principal: str, role: str, prefix: str = "claimgraph") -> list[object]:
    """confluent-kafka ``AclBinding``s (allow, any host) of :func:`grants`, for
    ``AdminClient.create_acls``; ``principal`` as Kafka writes it (``User:alice``)."""
    # the private modules: confluent_kafka.admin re-exports these without marking them so
    from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
    from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

    kinds = {
        "topic": ResourceType.TOPIC,
        "group": ResourceType.GROUP,
        "transactional-id": ResourceType.TRANSACTIONAL_ID,
    }
    patterns = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
    return [
        AclBinding(
            kinds[g.resource],
            g.name,
            patterns[g.pattern],
            principal,
            "*",
            AclOperation[op],
            AclPermissionType.ALLOW,
        )
        for g in grants(role, prefix)
        for op in g.operations
    ]


_ACLS_OPERATION = {
    "ALL": "All",
    "READ": "Read",
    "WRITE": "Write",
    "DESCRIBE": "Describe",
    "DESCRIBE_CONFIGS": "DescribeConfigs",
}


def kafka_acls_commands(
    principal: str, role: str, prefix: str = "claimgraph", bootstrap: str = "BOOTSTRAP"
) -> list[str]:
    """The ``kafka-acls.sh`` command lines that add :func:`grants` for ``principal``."""
    out = []
    for g in grants(role, prefix):
        args = ["kafka-acls.sh", "--bootstrap-server", bootstrap, "--add"]
        args += ["--allow-principal", principal]
        for op in g.operations:
            args += ["--operation", _ACLS_OPERATION[op]]
        args += [f"--{g.resource}", g.name, "--resource-pattern-type", g.pattern]
        out.append(shlex.join(args))
    return out


def markdown_table(roles: Sequence[str] = ROLES, prefix: str = "claimgraph") -> str:
    """The ACL table of ``docs/how-to/kafka.md`` (a test keeps the two equal)."""
    lines = [
        "| role | resource | name | pattern | operations | why |",
        "|---|---|---|---|---|---|",
    ]
    for role in roles:
        for g in grants(role, prefix):
            ops = ", ".join(_ACLS_OPERATION[o] for o in g.operations)
            lines.append(f"| {role} | {g.resource} | `{g.name}` | {g.pattern} | {ops} | {g.why} |")
    return "\n".join(lines)
