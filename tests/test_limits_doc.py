"""The docs' table of limits (reference/limits.md, generated from the code) is the code's: every
limit option, with the default it has and what happens past it, and every fixed bound."""

from __future__ import annotations

import re

import typer.main

from claimgraph.cli.main import app
from claimgraph.core.model import LIMITS
from claimgraph.service.resolvers import RESOLVER_LIMITS
from tests.docs_text import docs_reference, reference_page

# resolvers run takes None for "the library's default": the defaults it stands for
_LIBRARY = {
    ("resolvers run", "--cel-max-steps"): RESOLVER_LIMITS.rules.max_steps,
    ("resolvers run", "--arbiter-max-output"): RESOLVER_LIMITS.max_output,
    ("resolvers run", "--arbiter-max-timeout"): RESOLVER_LIMITS.max_timeout,
}


def _rows() -> list[tuple[str, str, str]]:
    text = reference_page("reference/limits.md")
    start = text.index("| What is bounded | Default | Option | Past it |")
    out = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        _, default, option, _ = (c.strip() for c in line.strip("|").split("|"))
        out.append((default, option.strip("`"), line))
    return out


def _options(command: str) -> dict[str, object]:
    """flag → default of a CLI command (``serve``, ``resolvers run``)."""
    group = typer.main.get_command(app)
    cmd = group
    for part in command.split():
        cmd = cmd.commands[part]  # type: ignore[attr-defined]
    return {o: p.default for p in cmd.params for o in p.opts}


def test_the_limits_table_lists_every_limit_option_with_its_default() -> None:
    """Each row's option exists with the row's default; every --max-* option of submit and
    serve, and every limit option of resolvers run, has a row."""
    listed = set()
    for default, option, line in _rows():
        m = re.fullmatch(r"(submit|serve|resolvers run) (--[\w-]+)", option)
        assert m, line
        command, flag = m.groups()
        opts = _options(command)
        assert flag in opts, line
        value = opts[flag] if opts[flag] is not None else _LIBRARY[(command, flag)]
        assert float(default) == float(value), (line, value)  # type: ignore[arg-type]
        listed.add((command, flag))
    for command in ("submit", "serve"):
        for flag in _options(command):
            if flag.startswith("--max-"):
                assert (command, flag) in listed, (command, flag)
    assert set(_LIBRARY) <= listed


def test_what_happens_past_each_limit_is_said_once_for_each_option() -> None:
    """The generator says what happens past every limit option, and of no option that is gone
    (a new --max-* option fails here until its consequence is written down)."""
    gen = docs_reference()
    options = {(command, max(p.opts, key=len)) for command, p in gen.limit_options()}
    assert set(gen.PAST) == options
    assert set(gen.LIBRARY_DEFAULTS) == set(_LIBRARY)


def test_every_fixed_bound_of_a_command_is_on_the_page() -> None:
    """Every key of LIMITS (core/model.py) is a row, with its value."""
    text = reference_page("reference/limits.md")
    for key, value in LIMITS.items():
        assert f"| `{key}` | `{value}` |" in text, key
