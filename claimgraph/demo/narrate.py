"""How the demos speak: each command with its decision, who decided each verdict, and long
text wrapped at word boundaries — never cut (a reader sees every word the log holds).

A *verdict* line names what it is about (an edge, a refund), the outcome and who decided:
an agent, a person (``principals.humans``), a rule, a vote, an arbitration agent or the
domain's fallback (:func:`decider`).
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from claimgraph.core.schema import GraphSchema
from claimgraph.errors import ConfigError
from claimgraph.service.graph import Receipt

__all__ = ["WIDTH", "Say", "cli_name", "decider", "prepare_dir", "show", "verdict", "wrap"]

Say = Callable[[str], None]
WIDTH = 100  # the demos' lines wrap here, at spaces only (an id is never split)


def wrap(text: str, first: str, rest: str | None = None) -> str:
    """``text`` after ``first``, wrapped at spaces under ``rest`` (default: as deep as first)."""
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=" " * len(first) if rest is None else rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def show(say: Say, who: str, what: str, r: Receipt) -> None:
    """A command (``who`` did ``what``) and the decision it got, at its version, with the
    signals it raised and the exits it fired (a tick's deadlines)."""
    d = r.decision
    say(f"  v{r.version:<4} {who:<17} {what}")
    extra = f" — {d['detail']}" if d["detail"] else ""
    say(wrap(f"[{d['kind'].upper()}] {d['reason']}{extra}", "        → ", " " * 10))
    for s in d["signals"]:
        say(wrap(f"signal: {s['kind']} — {s['detail']}", "        ", " " * 10))
    for x in d["exits"]:
        if x["detail"] != d["detail"]:  # an escalation's exit repeats its detail
            say(wrap(f"{x['trigger']} → {x['action']}: {x['detail']}", "        ", " " * 10))


def decider(name: str, schema: GraphSchema | None = None) -> str:
    """Who ``name`` — a principal or a resolver of a chain — is, in words."""
    kind, _, rest = name.partition(":")
    if kind == "rules" and rest:
        return f"{name} (a rule)"
    if kind == "arbiter" and rest:
        return f"{name} (an arbitration agent)"
    if name == "weighted":
        return "the calibrated weighted vote"
    if name == "majority":
        return "the majority vote"
    if name == "fallback":
        return "the domain's fallback"
    if name == "human":
        return "the chain's human step (a person must decide)"
    if schema is not None and schema.is_human(name):
        return f"{name} (a person)"
    return f"{name} (an agent)"


def verdict(say: Say, about: str, outcome: str, by: str) -> None:
    """The verdict line: what it is about, the outcome, who decided."""
    say(wrap(f"verdict on {about}: {outcome} — decided by {by}", "        ⇒ ", " " * 10))


def prepare_dir(path: Path, graph: str) -> None:
    """Make room for a demo graph, refusing to delete anything that is not an earlier demo."""
    if path.exists() and any(path.iterdir()):
        marker = path / "graph.json"
        if not marker.exists() or graph not in marker.read_text(encoding="utf-8"):
            raise ConfigError(f"{path} exists and is not a {graph} graph; choose another --into")
        shutil.rmtree(path)


def cli_name() -> str:
    """The command as the user can type it (``make demo`` runs ``.venv/bin/claimgraph``)."""
    if shutil.which("claimgraph") or not sys.argv[0].endswith("claimgraph"):
        return "claimgraph"
    return sys.argv[0]
