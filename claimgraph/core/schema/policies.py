"""Parsing an edge type's governance: fallback, merge, exits, decision checks, resolvers (pure)."""

from __future__ import annotations

from typing import Any

from claimgraph.core.model import ConflictPolicy
from claimgraph.core.schema.checker import NAME, Checker, kind_of
from claimgraph.core.schema.types import (
    DOMAIN_FALLBACKS,
    EXIT_ACTIONS,
    FALLBACK_MODES,
    RESOLVER_KINDS,
    DecisionChecks,
    Exits,
    Fallback,
    ResolverSpec,
    Rule,
    duration_ms,
)


def parse_fallback(c: Checker, raw: Any, path: str, domain: str) -> Fallback:
    default_mode = DOMAIN_FALLBACKS.get(domain, "escalate")
    if raw is None:
        if default_mode != "escalate":
            c.fail(
                path,
                f"domain {domain!r} needs a fallback value ({default_mode}): "
                "e.g. fallback: {value: REJECT}",
            )
        return Fallback(default_mode)
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping {{mode: ..., value: ...}}, got {kind_of(raw)}")
        return Fallback(default_mode)
    c.keys(raw, path, ("mode", "value", "safe"), ())
    mode = c.choice(raw.get("mode", default_mode), f"{path}.mode", FALLBACK_MODES) or default_mode
    value = raw.get("value")
    if value is not None and not isinstance(value, str):
        c.fail(f"{path}.value", f"expected a string value, got {kind_of(value)}")
        value = None
    if mode in ("fail_closed", "default") and value is None:
        c.fail(f"{path}.value", f"mode {mode} needs the value served to readers")
    safe = raw.get("safe", [])
    if not isinstance(safe, list) or not all(isinstance(x, str) for x in safe):
        c.fail(f"{path}.safe", f"expected a list of conservative values, got {kind_of(safe)}")
        safe = []
    return Fallback(mode, value, tuple(safe))


def _duration(c: Checker, value: Any, path: str) -> int | None:
    """A duration such as ``90s``, ``15m``, ``2h``, ``1d`` (or a number of ms) as ms."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    ms = duration_ms(value) if isinstance(value, str) else None
    if ms is None:
        c.fail(
            path, f"expected a positive duration such as 90s, 15m, 2h or 1d, got {kind_of(value)}"
        )
    return ms


def _positive_int(c: Checker, value: Any, path: str) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    c.fail(path, f"expected a whole number >= 1, got {kind_of(value)}")
    return None


def _unit(c: Checker, value: Any, path: str) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    c.fail(path, f"expected a number in [0, 1], got {kind_of(value)}")
    return None


def parse_merge(
    c: Checker, raw: Any, path: str, policy: str | None
) -> tuple[float, tuple[float, float]]:
    margin, prior = 0.1, (2.0, 2.0)
    if raw is None:
        return margin, prior
    if not isinstance(raw, dict):
        c.fail(
            path, f"expected a mapping {{margin: 0..1, prior: [wins, losses]}}, got {kind_of(raw)}"
        )
        return margin, prior
    c.keys(raw, path, ("margin", "prior"), ())
    if "margin" in raw:
        m = _unit(c, raw["margin"], f"{path}.margin")
        margin = m if m is not None else margin
    if "prior" in raw:
        p = raw["prior"]
        if (
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in p)
        ):
            prior = (float(p[0]), float(p[1]))
        else:
            c.fail(
                f"{path}.prior",
                f"expected [wins, losses]: two positive numbers (a Beta prior), got {kind_of(p)}",
            )
    if policy not in (None, ConflictPolicy.CONFIDENCE_WEIGHTED_MERGE.value):
        c.fail(path, "only meaningful with conflict_policy: confidence-weighted-merge")
    return margin, prior


def parse_exits(c: Checker, raw: Any, path: str, fallback: Fallback) -> Exits:
    if raw is None:
        return Exits()
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping of exit conditions, got {kind_of(raw)}")
        return Exits()
    c.keys(raw, path, ("deadline", "max_blocked_reads", "escalate_after_runs", "on_exit"), ())
    deadline = _duration(c, raw["deadline"], f"{path}.deadline") if "deadline" in raw else None
    reads = (
        _positive_int(c, raw["max_blocked_reads"], f"{path}.max_blocked_reads")
        if "max_blocked_reads" in raw
        else None
    )
    runs = (
        _positive_int(c, raw["escalate_after_runs"], f"{path}.escalate_after_runs")
        if "escalate_after_runs" in raw
        else None
    )
    on_exit = c.choice(raw.get("on_exit", "escalate"), f"{path}.on_exit", EXIT_ACTIONS)
    if on_exit == "fallback" and fallback.value is None:
        c.fail(
            f"{path}.on_exit",
            "on_exit: fallback needs a fallback value (fallback: {value: ...})",
        )
    return Exits(deadline, reads, runs, on_exit or "escalate")


def parse_decision_checks(c: Checker, raw: Any, path: str) -> DecisionChecks | None:
    if raw is None:
        return None
    if raw is True:
        return DecisionChecks()
    if not isinstance(raw, dict):
        c.fail(
            path,
            "expected a mapping {outlier_ratio, max_time_skew, max_version_skew} "
            f"(or true for the defaults), got {kind_of(raw)}",
        )
        return None
    c.keys(raw, path, ("outlier_ratio", "max_time_skew", "max_version_skew"), ())
    d = DecisionChecks()
    ratio = (
        _unit(c, raw["outlier_ratio"], f"{path}.outlier_ratio") if "outlier_ratio" in raw else None
    )
    skew = (
        _duration(c, raw["max_time_skew"], f"{path}.max_time_skew")
        if "max_time_skew" in raw
        else None
    )
    vskew = (
        _positive_int(c, raw["max_version_skew"], f"{path}.max_version_skew")
        if "max_version_skew" in raw
        else None
    )
    return DecisionChecks(
        ratio if ratio is not None else d.outlier_ratio,
        skew if skew is not None else d.max_time_skew_ms,
        vskew,
    )


# Bounds on a CEL expression, checked before it is compiled (rules revision 2 on): lark's
# parser and cel-python's evaluator take time and stack in proportion to both.
CEL_MAX_CHARS = 2048
CEL_MAX_NESTING = 24


def _cel(c: Checker, value: Any, path: str) -> str | None:
    if not isinstance(value, str) or not value.strip():
        c.fail(path, f"expected a CEL expression (text), got {kind_of(value)}")
        return None
    if c.strict and len(value) > CEL_MAX_CHARS:
        c.fail(path, f"the CEL expression has {len(value)} characters; at most {CEL_MAX_CHARS}")
        return None
    if c.strict and _nesting(value) > CEL_MAX_NESTING:
        c.fail(path, f"the CEL expression nests deeper than {CEL_MAX_NESTING} brackets")
        return None
    from claimgraph.core.rules import (
        compile_cel,  # CEL (cel-python): a sandboxed expression language
    )

    problem = compile_cel(value)
    if problem is not None:
        c.fail(path, f"not a valid CEL expression: {problem}")
        return None
    return value


def _rules(c: Checker, raw: Any, path: str) -> tuple[Rule, ...]:
    if not isinstance(raw, list) or not raw:
        c.fail(path, f"expected a non-empty list of rules, got {kind_of(raw)}")
        return ()
    out: list[Rule] = []
    for i, r in enumerate(raw):
        rp = f"{path}[{i}]"
        if not isinstance(r, dict):
            c.fail(
                rp,
                "expected a mapping {name, when, adopt | escalate | reject_all}, "
                f"got {kind_of(r)}",
            )
            continue
        c.keys(r, rp, ("name", "when", "adopt", "escalate", "reject_all"), ("when",))
        name = r.get("name", f"rule-{i + 1}")
        if not isinstance(name, str) or not NAME.match(name):
            c.fail(f"{rp}.name", f"expected a rule name, got {kind_of(name)}")
            name = f"rule-{i + 1}"
        when = _cel(c, r.get("when"), f"{rp}.when") if "when" in r else None
        actions = [k for k in ("adopt", "escalate", "reject_all") if k in r]
        if len(actions) != 1:
            c.fail(
                rp,
                "expected exactly one action: adopt (CEL over c), "
                "escalate (a reason) or reject_all: true",
            )
            continue
        adopt = _cel(c, r["adopt"], f"{rp}.adopt") if "adopt" in r else None
        esc = r.get("escalate")
        if "escalate" in r and (not isinstance(esc, str) or not esc):
            c.fail(f"{rp}.escalate", f"expected an escalation reason, got {kind_of(esc)}")
        if "reject_all" in r and r["reject_all"] is not True:
            c.fail(f"{rp}.reject_all", "expected true")
        if when is not None:
            out.append(
                Rule(name, when, adopt, esc if isinstance(esc, str) else None, "reject_all" in r)
            )
    return tuple(out)


def parse_resolvers(c: Checker, raw: Any, path: str) -> tuple[ResolverSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        c.fail(
            path, f"expected a list of resolvers ({', '.join(RESOLVER_KINDS)}), got {kind_of(raw)}"
        )
        return ()
    out: list[ResolverSpec] = []
    for i, entry in enumerate(raw):
        rp = f"{path}[{i}]"
        if isinstance(entry, str):
            entry = {entry: {}}
        if not isinstance(entry, dict) or len(entry) != 1:
            c.fail(
                rp,
                f"expected one of {', '.join(RESOLVER_KINDS)} "
                f"(a name or a one-key mapping), got {kind_of(entry)}",
            )
            continue
        ((kind, conf),) = entry.items()
        if kind not in RESOLVER_KINDS:
            c.fail(rp, f"unknown resolver {kind!r}; expected one of: {', '.join(RESOLVER_KINDS)}")
            continue
        kp = f"{rp}.{kind}"
        if kind == "rules":
            out.append(ResolverSpec("rules", rules=_rules(c, conf, kp), name="rules"))
            continue
        conf = {} if conf is None else conf
        if not isinstance(conf, dict):
            c.fail(kp, f"expected a mapping of options, got {kind_of(conf)}")
            continue
        if kind == "weighted":
            c.keys(conf, kp, ("margin",), ())
            m = _unit(c, conf["margin"], f"{kp}.margin") if "margin" in conf else 0.0
            out.append(ResolverSpec("weighted", margin=m or 0.0, name="weighted"))
        elif kind == "arbiter":
            c.keys(conf, kp, ("name", "command", "url", "timeout"), ())
            cmd = conf.get("command")
            url = conf.get("url")
            if (cmd is None) == (url is None):
                c.fail(kp, "expected exactly one of command (a list of arguments) or url")
                continue
            if cmd is not None and (
                not isinstance(cmd, list) or not cmd or not all(isinstance(x, str) for x in cmd)
            ):
                c.fail(f"{kp}.command", f"expected a list of strings, got {kind_of(cmd)}")
                continue
            if url is not None and (
                not isinstance(url, str) or not url.startswith(("http://", "https://"))
            ):
                c.fail(f"{kp}.url", f"expected an http(s) URL, got {kind_of(url)}")
                continue
            t = conf.get("timeout", 30)
            if not isinstance(t, int | float) or isinstance(t, bool) or not 0 < t <= 600:
                c.fail(f"{kp}.timeout", f"expected seconds in (0, 600], got {kind_of(t)}")
                t = 30
            name = conf.get("name", "arbiter")
            if not isinstance(name, str) or not NAME.match(name):
                c.fail(f"{kp}.name", f"expected a name, got {kind_of(name)}")
                name = "arbiter"
            out.append(
                ResolverSpec(
                    "arbiter",
                    command=tuple(cmd) if cmd else (),
                    url=url,
                    timeout=float(t),
                    name=name,
                )
            )
        else:
            c.keys(conf, kp, (), ())
            out.append(ResolverSpec(kind, name=kind))
    return tuple(out)


def _nesting(expr: str) -> int:
    """The deepest bracket nesting of ``expr`` (strings are not special-cased: a bound only)."""
    depth = deepest = 0
    for ch in expr:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}" and depth:
            depth -= 1
    return deepest
