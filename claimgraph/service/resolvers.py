"""Resolvers: settle quarantined conflicts by each edge type's chain, *outside* the governor.

The chain is tried in order — ``rules`` (CEL conditions over the claims), ``majority``,
``weighted`` (calibrated weighted vote), ``arbiter`` (an external agent: a command or an HTTP
endpoint, so an LLM can be plugged in), ``human`` (stop: a person decides) and ``fallback``
(the domain's: fail closed, default, or escalate). The first resolver that reaches a verdict
wins; one that cannot decide (a tie, a margin too small, an arbiter that fails or answers
nonsense) passes to the next. A chain that ends without a verdict escalates.

Every verdict is written to the log as a command — ``resolve`` (winner or reject-all) or
``escalate`` — carrying the resolver's identity and, in ``inputs``, what it saw and decided on
(the rule and what matched, the votes and weights, the arbiter's raw answer). The governor
never recomputes a verdict: replaying the log replays the verdict, which is what keeps replay
deterministic when the arbiter is a language model that would answer differently next time.

In a fail-closed domain (payment, refund, permission) an automatic resolver may only pick a
conservative outcome (a denial, the fallback value or one of the declared ``safe`` values);
anything else needs a human's verdict — the governor enforces this too (``needs_human``).

Arbiter protocol: the escalation payload (see :mod:`claimgraph.service.escalations`) as JSON on the
command's stdin or as the POST body; the answer is one JSON object::

    {"winner": "<claim id>"}  |  {"reject_all": true}  |  {"escalate": "reason"}
    (+ optional "rationale": "...")

Limits (:class:`ResolverLimits`): CEL rules are metered (:class:`~claimgraph.core.rules.
RuleLimits`); an arbiter's answer is read incrementally and refused past ``max_output``
bytes, its JSON nesting is measured before it is parsed, and its time is bounded: a command
runs in a process group of its own, and the whole group is killed at the timeout (and once
the command has answered, so nothing it started outlives it). Every failure is an
:class:`~claimgraph.errors.ArbiterError`: the chain records why and moves on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from select import select as _poll_fds
from typing import Any, Protocol

from claimgraph.core.governance import Vote, majority, merge
from claimgraph.core.rules import RULE_LIMITS, RuleLimits, matches, select
from claimgraph.core.schema import EdgeType, ResolverSpec
from claimgraph.errors import ArbiterError, InputError, RuleError
from claimgraph.service.inputs import InputLimits, loads

__all__ = [
    "RESOLVER_LIMITS",
    "Arbiter",
    "CommandArbiter",
    "HttpArbiter",
    "ResolverLimits",
    "Verdict",
    "arbiter_for",
    "decide_conflict",
    "run_resolvers",
]


@dataclass(frozen=True, slots=True)
class ResolverLimits:
    """What one resolver pass may cost: CEL rules, and each arbiter's answer and time."""

    rules: RuleLimits = RULE_LIMITS
    max_output: int = 1024 * 1024  # bytes of an arbiter's answer (stdout or HTTP body)
    max_depth: int = 32  # JSON nesting of the answer, measured before parsing
    max_timeout: float = 300.0  # seconds: a schema's arbiter timeout is capped at this


RESOLVER_LIMITS = ResolverLimits()
_STDERR_TAIL = 4096  # bytes of an arbiter's stderr kept for the error message


@dataclass(slots=True)
class Verdict:
    """What a resolver chain concluded about one conflict."""

    action: str  # winner | reject_all | escalate
    resolver: str  # rules:NAME | majority | weighted | arbiter:NAME | human | fallback | chain
    rationale: str
    winner: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)

    def inputs_json(self) -> str:
        return json.dumps(self.inputs, sort_keys=True, separators=(",", ":"), default=str)


class Arbiter(Protocol):
    """An arbitration agent: reads an escalation payload, answers a verdict as a mapping."""

    name: str

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]: ...


class CommandArbiter:
    """Runs an external command: the payload as JSON on stdin, the verdict as JSON on stdout.

    The command runs in a new session (its own process group). Its output is read as it
    comes, at most ``max_output`` bytes; at ``timeout`` seconds, or once it has exited, the
    whole group is killed, so a child it left running dies with it.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        timeout: float = 30.0,
        name: str = "",
        max_output: int = RESOLVER_LIMITS.max_output,
        max_depth: int = RESOLVER_LIMITS.max_depth,
    ) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.name = name or "arbiter"
        self.max_output = max_output
        self.max_depth = max_depth

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        data = json.dumps(payload, default=str).encode()
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ArbiterError(f"{self.command[0]}: {exc}") from None
        try:
            out, err = self._exchange(proc, data, time.monotonic() + self.timeout)
        finally:
            _kill_group(proc)
        if proc.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            raise ArbiterError(
                f"{self.command[0]} exited with {proc.returncode}"
                + (f": {lines[-1][:200]}" if lines else "")
            )
        return _answer(out, self.max_depth)

    def _exchange(
        self, proc: subprocess.Popen[bytes], data: bytes, deadline: float
    ) -> tuple[bytes, bytes]:
        """Write ``data``, read stdout (capped) and stderr (its tail) until the command exits
        and its output ends, or the deadline passes; the caller kills the group."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        out = bytearray()
        err = bytearray()
        try:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                os.set_blocking(pipe.fileno(), False)
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
            sel.register(proc.stdout, selectors.EVENT_READ)
            sel.register(proc.stderr, selectors.EVENT_READ)
            sent = 0
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ArbiterError(f"{self.command[0]}: no answer within {self.timeout:g}s")
                # a grandchild may hold the pipes open after the command exits: poll its exit
                events = sel.select(min(left, 0.1))
                if not events and proc.poll() is not None and not _readable(proc):
                    break
                for key, _ in events:
                    f: Any = key.fileobj
                    if f is proc.stdin:
                        try:
                            sent += os.write(proc.stdin.fileno(), data[sent : sent + 65536])
                        except BrokenPipeError:
                            sent = len(data)  # it stopped reading: its answer still counts
                        if sent >= len(data):
                            sel.unregister(proc.stdin)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(f)
                    elif f is proc.stdout:
                        out += chunk
                        if len(out) > self.max_output:
                            raise ArbiterError(
                                f"{self.command[0]} answered more than {self.max_output} bytes"
                            )
                    else:
                        err = (err + chunk)[-_STDERR_TAIL:]
            left = max(deadline - time.monotonic(), 0.0)
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                raise ArbiterError(
                    f"{self.command[0]}: did not exit within {self.timeout:g}s"
                ) from None
        finally:
            sel.close()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()
        return bytes(out), bytes(err)


def _readable(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the command's stdout has bytes waiting (checked once it has exited)."""
    assert proc.stdout is not None
    return bool(_poll_fds([proc.stdout], [], [], 0)[0])


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (itself and whatever it started), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        proc.wait()


class HttpArbiter:
    """POSTs the payload as JSON to an endpoint; the response body is the verdict.

    The body is streamed and refused past ``max_output`` bytes (a declared Content-Length
    above it is refused before reading); the whole exchange is bounded by ``timeout``.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        name: str = "",
        max_output: int = RESOLVER_LIMITS.max_output,
        max_depth: int = RESOLVER_LIMITS.max_depth,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.name = name or "arbiter"
        self.max_output = max_output
        self.max_depth = max_depth

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        import httpx

        deadline = time.monotonic() + self.timeout
        body = bytearray()
        try:
            with httpx.stream(
                "POST", self.url, content=json.dumps(payload, default=str),
                timeout=self.timeout,
                # no compression: what is counted is what is parsed (no decompression bomb)
                headers={"content-type": "application/json", "accept-encoding": "identity"},
            ) as r:  # fmt: skip
                if r.status_code != 200:
                    raise ArbiterError(f"{self.url} answered HTTP {r.status_code}")
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_output:
                    raise ArbiterError(
                        f"{self.url} would answer {declared} bytes; at most {self.max_output}"
                    )
                for chunk in r.iter_raw(65536):
                    body += chunk
                    if len(body) > self.max_output:
                        raise ArbiterError(f"{self.url} answered more than {self.max_output} bytes")
                    if time.monotonic() > deadline:
                        raise ArbiterError(f"{self.url}: no answer within {self.timeout:g}s")
        except httpx.HTTPError as exc:
            raise ArbiterError(f"{self.url}: {exc}") from None
        return _answer(bytes(body), self.max_depth)


def _answer(raw: bytes, max_depth: int = RESOLVER_LIMITS.max_depth) -> Mapping[str, Any]:
    try:
        value = loads(raw, InputLimits(max_line=len(raw), max_depth=max_depth))
    except InputError as exc:
        raise ArbiterError(f"{exc}: {raw[:120]!r}") from None
    if not isinstance(value, dict):
        raise ArbiterError(f"expected a JSON object, got {type(value).__name__}")
    return value


_KEPT = 16 * 1024  # bytes of an arbiter's answer kept whole in a verdict's inputs


def _kept(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """The answer as a verdict records it: whole if small, else its verdict keys, the start
    of its rationale and the SHA-256 of the whole (so the resolve command stays within the
    governor's size limit for ``inputs`` and is not rejected, and retried, every pass)."""
    raw = json.dumps(answer, sort_keys=True, default=str)
    if len(raw.encode()) <= _KEPT:
        return answer
    keys = ("winner", "reject_all", "escalate")
    return {
        **{k: answer[k] for k in keys if k in answer and len(str(answer[k])) <= 256},
        "rationale": str(answer.get("rationale", ""))[:1000],
        "truncated": {
            "bytes": len(raw.encode()),
            "sha256": hashlib.sha256(raw.encode()).hexdigest(),
        },
    }


def arbiter_for(spec: ResolverSpec, limits: ResolverLimits = RESOLVER_LIMITS) -> Arbiter:
    """The arbiter a schema's ``arbiter:`` entry describes, within ``limits``."""
    timeout = min(spec.timeout, limits.max_timeout)
    bounds = {"max_output": limits.max_output, "max_depth": limits.max_depth}
    if spec.command:
        return CommandArbiter(spec.command, timeout=timeout, name=spec.name, **bounds)
    assert spec.url is not None
    return HttpArbiter(spec.url, timeout=timeout, name=spec.name, **bounds)


def _votes(claims: Sequence[Mapping[str, Any]]) -> list[Vote]:
    return [
        Vote(
            c["claim_id"],
            c["agent"],
            c["outcome"],
            float(c["confidence"]),
            int(c["asserted_at"]),
            c["based_on_version"],
        )
        for c in sorted(claims, key=lambda c: (c["asserted_at"], c["claim_id"]))
    ]


def _safe(et: EdgeType, claims: Sequence[Mapping[str, Any]], claim_id: str) -> bool:
    if not et.fallback.fails_closed:
        return True
    c = next(c for c in claims if c["claim_id"] == claim_id)
    return et.fallback.is_safe(c["polarity"] == "assert", str(c["object"]))


def decide_conflict(
    payload: Mapping[str, Any],
    et: EdgeType,
    *,
    arbiters: Mapping[str, Arbiter] | None = None,
    limits: ResolverLimits = RESOLVER_LIMITS,
) -> Verdict:
    """Run ``et``'s resolver chain over a conflict's escalation payload.

    ``arbiters`` overrides the arbiters the schema declares (by name), e.g. for tests or an
    in-process model client; otherwise they are built from the schema, within ``limits``.
    """
    claims: list[Mapping[str, Any]] = list(payload["claims"])
    ids = {c["claim_id"] for c in claims}
    trail: list[dict[str, Any]] = []  # resolvers that passed, and why
    base = {"conflict_id": payload["conflict_id"], "version": payload["version"]}

    def verdict(
        action: str, resolver: str, rationale: str, winner: str | None, **kw: Any
    ) -> Verdict:
        inputs = {**base, **kw, "passed": trail}
        return Verdict(action, resolver, rationale[:1000], winner, inputs)

    def adopt(resolver: str, winner: str, rationale: str, **kw: Any) -> Verdict | None:
        if not _safe(et, claims, winner):
            trail.append(
                {
                    "resolver": resolver,
                    "why": f"would pick {winner}, not a conservative outcome in domain "
                    f"{et.domain} (fails closed): a human must decide",
                }
            )
            return None
        return verdict("winner", resolver, rationale, winner, **kw)

    activation = {"claims": claims, "edge_type": et.name, "domain": et.domain}
    for spec in et.resolvers:
        if spec.kind == "rules":
            for rule in spec.rules:
                name = f"rules:{rule.name}"
                try:
                    if not matches(rule.when, activation, limits.rules):
                        continue
                    if rule.escalate is not None:
                        return verdict(
                            "escalate", name, rule.escalate, None, rule=rule.name, when=rule.when
                        )
                    if rule.reject_all:
                        return verdict(
                            "reject_all",
                            name,
                            f"rule {rule.name}: reject all",
                            None,
                            rule=rule.name,
                            when=rule.when,
                        )
                    assert rule.adopt is not None
                    picked = select(rule.adopt, claims, activation, limits.rules)
                except RuleError as exc:
                    trail.append({"resolver": name, "why": f"CEL error: {exc}"})
                    continue
                outcomes = {c["outcome"] for c in claims if c["claim_id"] in picked}
                if len(outcomes) != 1:
                    trail.append(
                        {
                            "resolver": name,
                            "why": f"adopt selected {len(outcomes)} outcomes; needs exactly one",
                        }
                    )
                    continue
                v = adopt(
                    name,
                    picked[0],
                    f"rule {rule.name}: adopt {outcomes.pop()}",
                    rule=rule.name,
                    when=rule.when,
                    adopt=rule.adopt,
                    matched=picked,
                )
                if v is not None:
                    return v
        elif spec.kind == "majority":
            leader, counts = majority(_votes(claims))
            if leader is None:
                trail.append({"resolver": "majority", "why": f"tie: {counts}"})
                continue
            winner = next(c["claim_id"] for c in claims if c["outcome"] == leader)
            v = adopt("majority", winner, f"majority: {leader} {counts}", counts=counts)
            if v is not None:
                return v
        elif spec.kind == "weighted":
            record = {
                c["agent"]: (int(c["record"]["wins"]), int(c["record"]["losses"])) for c in claims
            }
            m = merge(_votes(claims), record, prior=et.merge_prior, threshold=spec.margin)
            if m["winner"] is None:
                trail.append(
                    {"resolver": "weighted", "why": f"margin {m['margin']:.3f} < {spec.margin:g}"}
                )
                continue
            v = adopt(
                "weighted",
                m["winner"],
                f"calibrated weighted vote: {m['outcome']} "
                f"(merged confidence {m['merged_confidence']:.3f}, margin {m['margin']:.3f})",
                merge=m,
            )
            if v is not None:
                return v
        elif spec.kind == "arbiter":
            arb = (arbiters or {}).get(spec.name) or arbiter_for(spec, limits)
            name = f"arbiter:{spec.name}"
            try:
                answer = dict(arb.arbitrate(payload))
            except ArbiterError as exc:
                trail.append({"resolver": name, "why": str(exc)[:300]})
                continue
            rationale = str(answer.get("rationale", ""))[:1000]
            if answer.get("escalate"):
                return verdict(
                    "escalate", name, str(answer["escalate"])[:200], None, answer=_kept(answer)
                )
            if answer.get("reject_all") is True:
                return verdict(
                    "reject_all", name, rationale or "reject all", None, answer=_kept(answer)
                )
            w = answer.get("winner")
            if isinstance(w, str) and w in ids:
                v = adopt(name, w, rationale or f"arbiter picked {w}", answer=_kept(answer))
                if v is not None:
                    return v
                continue
            trail.append({"resolver": name, "why": f"not a verdict: {json.dumps(answer)[:200]}"})
        elif spec.kind == "human":
            return verdict("escalate", "human", "a person decides (resolver chain: human)", None)
        elif spec.kind == "fallback":
            fb = et.fallback
            if fb.mode in ("fail_closed", "default") and fb.value is not None:
                hold = [
                    c["claim_id"]
                    for c in claims
                    if c["polarity"] == "assert" and str(c["object"]) == fb.value
                ]
                if hold:
                    return verdict(
                        "winner",
                        "fallback",
                        f"domain {et.domain} ({fb.mode}): adopt {fb.value}",
                        hold[0],
                        fallback=fb.value,
                    )
                if fb.mode == "fail_closed":
                    return verdict(
                        "escalate",
                        "fallback",
                        f"domain {et.domain} fails closed: readers get {fb.value}; "
                        "no claim holds it, a person decides",
                        None,
                        fallback=fb.value,
                    )
                trail.append({"resolver": "fallback", "why": f"no claim holds {fb.value}"})
                continue
            return verdict("escalate", "fallback", f"domain {et.domain}: escalate", None)
    return verdict("escalate", "chain", "no resolver reached a verdict", None)


def run_resolvers(
    graph: Any,
    *,
    agent: str,
    arbiters: Mapping[str, Arbiter] | None = None,
    at: int | None = None,
    limits: ResolverLimits = RESOLVER_LIMITS,
) -> list[tuple[str, Verdict, Any]]:
    """One pass: run the resolver chain of every open, not yet escalated conflict.

    ``graph`` is any graph handle (embedded, Kafka or HTTP) and ``agent`` the resolver
    principal the verdicts are written as. Returns (conflict id, verdict, receipt) per conflict.
    """
    version = graph.head() if at is None else at
    schema = graph.reader.schema(version)
    done: list[tuple[str, Verdict, Any]] = []
    if schema is None:
        return done
    for row in graph.quarantine(at=version):
        if row.get("escalated_at") is not None:
            continue
        et = schema.edge_types.get(row["edge_type"])
        if et is None or not et.resolvers:
            continue
        payload = graph.escalation(row["conflict_id"], at=version)
        if payload is None:
            continue
        v = decide_conflict(payload, et, arbiters=arbiters, limits=limits)
        cid = row["conflict_id"]
        if v.action == "escalate":
            r = graph.escalate(cid, agent=agent, reason=v.rationale[:256], resolver=v.resolver)
        else:
            r = graph.resolve(
                cid,
                agent=agent,
                winner=v.winner if v.action == "winner" else None,
                resolver=v.resolver,
                rationale=v.rationale,
                inputs=v.inputs_json(),
            )
        done.append((cid, v, r))
    return done
