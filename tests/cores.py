"""The governor's behaviour suite, which ``make test`` runs on both cores.

``make test`` runs every test with the native core loaded (when it is built), then the files
below again with ``CLAIMGRAPH_PURE=1``, on the pure-Python core — as CPython runs
``test_datetime`` against ``_datetime`` and ``_pydatetime``. They drive the governor the way a
process does (the embedded runtime, or :func:`claimgraph.native.decide.decide`), so each pass
exercises the core it loaded: governance, claims and conflicts, fail closed, exits and
lifecycle, revisions, hostile inputs, generated streams, replay and the fold.
``python -m tests.cores`` prints their paths (the Makefile's second pass).
"""

from __future__ import annotations

__all__ = ["BOTH_CORES"]

BOTH_CORES = (
    "test_governor.py",  # authority, claims, slots, policies, lifecycle, one by one
    "test_policy.py",  # schema validation
    "test_governance.py",  # merge, exits, resolvers, signals, fallbacks
    "test_fail_closed.py",
    "test_rules_revisions.py",
    "test_placement.py",
    "test_signing.py",
    "test_erasure.py",
    "test_hostile_submit.py",
    "test_hostile_schemas.py",
    "test_hostile_resolvers.py",
    "test_properties.py",  # generated streams: replay, reads at a version, authority
    "test_schema_evolution.py",
    "test_audit_ranges.py",
    "test_state_codec.py",
    "test_checkpoints.py",
    "test_total_governor.py",  # commands drawn from the declared domains: one decision each
    "test_total_repros.py",  # far-future times, a failing rule, witnesses of lost versions
    "test_one_slot_one_answer.py",  # the slot read and its edge reads agree, generated
)

if __name__ == "__main__":
    print(" ".join(f"tests/{name}" for name in BOTH_CORES))
