"""The reference pages of the docs, generated from the code when the site is built.

``make docs`` builds the site; ``tools/mkdocs_hooks.py`` adds every page of :data:`PAGES` to it
from here, so a page is the code's own declaration of the day (the click app, the FastAPI
app's OpenAPI, the MCP server, the command catalogue, the limits, the error tree, the metric
registries, the configuration keys) and cannot drift from it. ``python tools/docs_reference.py
--out DIR`` writes the same pages as markdown files, to read them without building the site.

What the code does not declare — what happens past each limit option, the environment
variables read outside the CLI — is declared here once, and ``tests/test_reference_docs.py``
fails when the code gains an option or a variable this file does not describe.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import html
import inspect
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import typer.main

ROOT = Path(__file__).resolve().parent.parent

# -- markdown ----------------------------------------------------------------------------------

_CODE = re.compile(r"(`[^`]+`)")
_SPECIAL = re.compile(r"([\\*_\[\]>#])")  # Python-Markdown's escapable ones; < is an entity


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text).replace("<", "&lt;")


def md(text: str | None) -> str:
    """Plain text (help, docstrings) as markdown: code spans kept, everything else escaped."""
    parts = _CODE.split(" ".join((text or "").split()))
    return "".join(p if p.startswith("`") else _escape(p) for p in parts)


def cell(text: object) -> str:
    """A table cell: escaped like :func:`md`, and no ``|`` that would split the cell."""
    out = []
    for p in _CODE.split(" ".join(str(text if text is not None else "").split())):
        if p.startswith("`") and "|" in p:
            out.append("<code>" + html.escape(p[1:-1]).replace("|", "&#124;") + "</code>")
        elif p.startswith("`"):
            out.append(p)
        else:
            out.append(_escape(p).replace("|", "&#124;"))
    return "".join(out)


def code(text: object) -> str:
    """Inline code for a value (a cell may hold it: a ``|`` is spelt as an entity)."""
    s = str(text)
    if "|" in s or "`" in s:
        return "<code>" + html.escape(s).replace("|", "&#124;") + "</code>"
    return f"`{s}`"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def paragraphs(text: str | None) -> str:
    """A help text or docstring, paragraph by paragraph (its line breaks are not the reader's)."""
    blocks = inspect.cleandoc(text or "").split("\n\n")
    return "\n\n".join(md(b) for b in blocks if b.strip())


def first_line(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


GENERATED = (
    "<!-- Generated from the code by tools/docs_reference.py when the site is built: "
    "edit the code, not this page. -->\n"
)


def source_comments(path: Path, name: str) -> dict[str, str]:
    """The comments beside (or just above) each entry of a dict literal or the fields of a
    class assigned at the top of ``path``: ``name`` = ``{"key": value,  # comment}``."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    spans: dict[int, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                value = node.value
                if isinstance(value, ast.Dict):
                    for k in value.keys:
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            spans[k.lineno] = k.value
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    spans[item.lineno] = item.target.id
                if isinstance(item, ast.Assign):
                    for t in item.targets:
                        if isinstance(t, ast.Name):
                            spans[t.lineno] = t.id
    comments: dict[int, str] = {}  # line → a comment after code on it
    alone: dict[int, str] = {}  # line → a comment that is the whole line
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            whole = tok.line.strip().startswith("#")
            (alone if whole else comments)[tok.start[0]] = tok.string.lstrip("#").strip()
    out: dict[str, str] = {}
    for line, key in spans.items():
        if line in comments:
            out[key] = comments[line]
        else:  # a comment block just above the entry
            above = []
            n = line - 1
            while n in alone:
                above.insert(0, alone[n])
                n -= 1
            if above:
                out[key] = " ".join(above)
    return out


# -- the CLI -----------------------------------------------------------------------------------


# typer carries its own copy of click: its commands are duck-typed here, as in cli/config.py.
Command = Any


def is_group(cmd: Command) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def is_option(p: Any) -> bool:
    return getattr(p, "param_type_name", "") == "option"


def is_argument(p: Any) -> bool:
    return getattr(p, "param_type_name", "") == "argument"


@functools.cache
def cli_root() -> Command:
    """The click command tree of ``claimgraph`` (built once: typer builds it on each call)."""
    from claimgraph.cli.main import app

    root = typer.main.get_command(app)
    assert is_group(root)
    return root


def walk_cli(
    cmd: Command | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Command]]:
    """Every command and group under ``cmd`` (default: the root), depth first, as declared."""
    cmd = cmd or cli_root()
    if is_group(cmd):
        for name, sub in cmd.commands.items():
            yield (*path, name), sub
            yield from walk_cli(sub, (*path, name))


def _default(p: Any) -> str:
    d = p.default
    if d is None or callable(d) or (getattr(p, "is_flag", False) and d is False):
        return ""
    if isinstance(d, list | tuple):
        return ", ".join(code(x) for x in d) if d else ""
    return code(d)


def _type(p: Any) -> str:
    if getattr(p, "is_flag", False):
        return "flag"
    shown = str(p.display_type(_root_context())).strip("<>")
    if "|" in shown:
        return " or ".join(code(c) for c in shown.split("|"))
    return shown


@functools.cache
def _root_context() -> Any:
    return typer.Context(cli_root())


def _flags(p: Any) -> str:
    opts = [*p.opts, *getattr(p, "secondary_opts", [])]
    return " ".join(code(o) for o in opts)


def options_table(cmd: Command) -> str:
    rows = []
    for p in cmd.params:
        if is_option(p) and p.name != "help":
            env = code(p.envvar) if isinstance(p.envvar, str) else ""
            rows.append([_flags(p), _type(p), _default(p), env, cell(p.help)])
    if not rows:
        return ""
    return table(["Option", "Type", "Default", "Environment", "What it sets"], rows)


def arguments_table(cmd: Command) -> str:
    rows = []
    for p in cmd.params:
        if is_argument(p):
            name = (p.name or "").upper()
            many = "…" if p.nargs != 1 else ""
            req = "yes" if p.required else "no"
            rows.append([code(name + many), _type(p), req, cell(getattr(p, "help", "") or "")])
    if not rows:
        return ""
    return table(["Argument", "Type", "Required", "What it is"], rows)


def _usage(path: tuple[str, ...], cmd: Command) -> str:
    args = " ".join(
        (p.name or "").upper() + ("…" if p.nargs != 1 else "")
        if p.required
        else f"[{(p.name or '').upper()}]"
        for p in cmd.params
        if is_argument(p)
    )
    sub = " COMMAND" if is_group(cmd) else ""
    return " ".join(x for x in ("claimgraph", *path, "[OPTIONS]" + sub, args) if x)


def cli_page() -> str:
    from claimgraph.cli.common import PANELS

    root = cli_root()
    out = [
        "# Command line\n",
        GENERATED,
        "Every command of `claimgraph`, generated from its click app. `claimgraph --help` "
        "lists them in these panels; `claimgraph COMMAND --help` prints one. The global "
        "options go before the command (`claimgraph --data ./g get ...`); each option can "
        "also be set in the environment or a config file (see "
        "[Configuration keys](configuration.md)). Exit codes are in "
        "[Exit codes](exit-codes.md).\n",
        "## Global options\n",
        options_table(root) + "\n",
    ]
    by_panel: dict[str, list[tuple[tuple[str, ...], Command]]] = {p: [] for p in PANELS}
    for path, cmd in walk_cli(root):
        if len(path) == 1:
            by_panel.setdefault(getattr(cmd, "rich_help_panel", None) or "Other", []).append(
                (path, cmd)
            )
    for panel, tops in by_panel.items():
        if not tops:
            continue
        out.append(f"## {panel}\n")
        for top_path, top in tops:
            for path, cmd in [(top_path, top), *walk_cli(top, top_path)]:
                level = "###" if len(path) == 1 else "####"
                out.append(f"{level} claimgraph {' '.join(path)}\n")
                out.append(code(_usage(path, cmd)) + "\n")
                out.append(paragraphs(cmd.help) + "\n")
                for part in (arguments_table(cmd), options_table(cmd)):
                    if part:
                        out.append(part + "\n")
                if is_group(cmd):
                    subs = ", ".join(code(n) for n in cmd.commands)
                    out.append(f"Commands: {subs}.\n")
    return "\n".join(out)


# -- the HTTP API ------------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    from claimgraph.http.app import openapi_document

    doc: dict[str, Any] = openapi_document()
    return doc


def _ref(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema or "oneOf" in schema:
        kinds = [_schema_type(s) for s in schema.get("anyOf") or schema.get("oneOf") or []]
        return " or ".join(k for k in kinds if k != "null") or "null"
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    if "enum" in schema:
        return " or ".join(code(e) for e in schema["enum"])
    t = schema.get("type", "any")
    if t == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if t == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return "object" if extra is True else f"object of {_schema_type(extra)}"
    return str(t)


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) else str(v)


def _limits(schema: dict[str, Any]) -> str:
    """A JSON schema's bounds in words: ``1 to 256 characters``, ``at most 100 items``."""
    found = []
    for alt in [schema, *schema.get("anyOf", [])]:
        for lo, hi, unit in (
            ("minLength", "maxLength", "characters"),
            ("minItems", "maxItems", "items"),
        ):
            if lo in alt and hi in alt:
                found.append(f"{_num(alt[lo])} to {_num(alt[hi])} {unit}")
            elif hi in alt:
                found.append(f"at most {_num(alt[hi])} {unit}")
            elif lo in alt and alt[lo] > 0:
                found.append(f"at least {_num(alt[lo])} {unit}")
        low, high = alt.get("minimum"), alt.get("maximum")
        if high is not None and high >= 2**63 - 1024:  # a 64-bit integer: no bound to state
            high = None
        if low is not None and high is not None:
            found.append(f"{_num(low)} to {_num(high)}")
        elif high is not None:
            found.append(f"at most {_num(high)}")
        elif low is not None:
            found.append(f"at least {_num(low)}")
    return "; ".join(found)


def properties_table(doc: dict[str, Any], schema: dict[str, Any]) -> str:
    schema = _ref(doc, schema)
    props = schema.get("properties", {})
    if not props:
        return ""
    required = set(schema.get("required", []))
    rows = []
    for name, prop in props.items():
        default = prop.get("default")
        shown = code(json.dumps(default)) if "default" in prop else ""
        what = " ".join(x for x in (prop.get("description", ""), _limits(prop)) if x)
        rows.append(
            [
                code(name),
                cell(_schema_type(prop)),
                "yes" if name in required else "no",
                shown,
                cell(what),
            ]
        )
    return table(["Field", "Type", "Required", "Default", "What it is"], rows)


def operations(doc: dict[str, Any] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) for every route of the HTTP API, in declaration order."""
    doc = doc or openapi()
    return [
        (method.upper(), path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
    ]


def _operation(
    doc: dict[str, Any], method: str, path: str, op: dict[str, Any], common: dict[str, str]
) -> str:
    out = [f"### {method} {path}\n"]
    if op.get("description"):
        out.append(paragraphs(op["description"]) + "\n")
    elif op.get("summary"):
        out.append(md(op["summary"]) + ".\n")
    params = op.get("parameters", [])
    if params:
        rows = []
        for p in params:
            s = p.get("schema", {})
            what = " ".join(x for x in (p.get("description", ""), _limits(s)) if x)
            default = code(json.dumps(s["default"])) if "default" in s else ""
            rows.append(
                [
                    code(p["name"]),
                    p["in"],
                    cell(_schema_type(s)),
                    "yes" if p.get("required") else "no",
                    default,
                    cell(what),
                ]
            )
        out.append(
            table(["Parameter", "In", "Type", "Required", "Default", "What it is"], rows) + "\n"
        )
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if body:
        schema = body.get("schema", {})
        name = _schema_type(schema)
        target = _ref(doc, schema)
        out.append(f"Body: `{name}` — {md(target.get('description', ''))}\n")
        props = properties_table(doc, schema)
        if props:
            out.append(props + "\n")
    own = [(st, r) for st, r in op.get("responses", {}).items() if st not in common]
    codes = ", ".join(f"{code(st)} {md(r.get('description', ''))}" for st, r in own)
    shared = any(st in common for st in op.get("responses", {}))
    out.append(f"Answers: {codes}" + ("; or one of the errors above." if shared else ".") + "\n")
    return "\n".join(out)


def common_responses(doc: dict[str, Any]) -> dict[str, str]:
    """The error responses most routes share (status → description), listed once."""
    ops = operations(doc)
    seen: dict[tuple[str, str], int] = {}
    for _, _, op in ops:
        for st, r in op.get("responses", {}).items():
            if st.startswith(("4", "5")):
                key = (st, r.get("description", ""))
                seen[key] = seen.get(key, 0) + 1
    return {st: what for (st, what), n in sorted(seen.items()) if n * 2 >= len(ops)}


_TAGS = {
    "commands": (
        "Commands",
        "Each client command of the [command catalogue](commands.md) has its route "
        "`POST /v1/commands/<type>`; `POST /v1/commands` takes a batch of them.",
    ),
    "reads": ("Reads", "A read of the graph takes `at` (default: head) and answers as of it."),
    "runs": ("Runs", "Traces of agents' runs: pinned version, reads, writes, tool calls."),
}


def http_page() -> str:
    doc = openapi()
    out = [
        "# HTTP API\n",
        GENERATED,
        "Every route of the FastAPI app (`claimgraph serve`), from its OpenAPI document "
        f"(version {code(doc['info'].get('version', ''))}). The same document is served at "
        "`/openapi.json` and checked in as `docs/openapi.json` (`python tools/openapi.py` "
        "rewrites it). Errors are `application/problem+json` bodies carrying a reason code; "
        "their statuses are in [Exit codes](exit-codes.md). Identity comes from the bearer "
        "token (`Authorization: Bearer TOKEN`), never from a field of the body.\n",
    ]
    common = common_responses(doc)
    out.append(
        "Most routes answer these errors besides their own, each as a problem body:\n\n"
        + table(["Status", "When"], [[code(st), cell(what)] for st, what in common.items()])
        + "\n"
    )
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for method, path, op in operations(doc):
        by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    for tag, ops in by_tag.items():
        title, intro = _TAGS.get(tag, (tag.title(), ""))
        out.append(f"## {title}\n")
        if intro:
            out.append(intro + "\n")
        out += [_operation(doc, m, p, op, common) for m, p, op in ops]
    return "\n".join(out)


# -- MCP ---------------------------------------------------------------------------------------


def mcp_resources() -> list[dict[str, str]]:
    import anyio

    from claimgraph.mcp.server import build_server

    def no_session(ctx: Any) -> Any:
        raise RuntimeError("nothing is called while the resources are listed")

    async def go() -> list[dict[str, str]]:
        resources = await build_server(no_session).list_resources()
        return [
            {"uri": str(r.uri), "name": r.name, "description": r.description or ""}
            for r in resources
        ]

    return anyio.run(go)


def mcp_page() -> str:
    from claimgraph.mcp.toolspec import mcp_tools

    out = [
        "# MCP tools\n",
        GENERATED,
        "The tools and resources of the MCP server (`claimgraph mcp` over stdio, and `/mcp` "
        "in `claimgraph serve`), from their typed signatures. `claimgraph tools --format "
        "openai|anthropic|json-schema` prints the same tools in a vendor's format. A tool "
        "never takes an identity: it comes from the transport.\n",
        "## Tools\n",
    ]
    for t in mcp_tools():
        out.append(f"### {t['name']}\n")
        out.append(md(t["description"]) + "\n")
        schema = t["input_schema"]
        doc = {"components": {"schemas": schema.get("$defs", {})}}
        fixed = json.loads(json.dumps(schema).replace("#/$defs/", "#/components/schemas/"))
        props = properties_table(doc, fixed)
        out.append((props or "No parameters.") + "\n")
    out.append("## Resources\n")
    out.append(
        table(
            ["URI", "Name", "What it holds"],
            [[code(r["uri"]), code(r["name"]), cell(r["description"])] for r in mcp_resources()],
        )
        + "\n"
    )
    return "\n".join(out)


# -- the command catalogue ---------------------------------------------------------------------


def jsonl_schemas() -> dict[str, dict[str, Any]]:
    """JSON Lines ``type`` value → the JSON schema of that command's line."""
    from pydantic import TypeAdapter

    from claimgraph.service.inputs import CommandIn

    schema = TypeAdapter(CommandIn).json_schema()
    defs = schema.get("$defs", {})
    out = {}
    for ref in schema["discriminator"]["mapping"].items():
        name, target = ref
        out[name] = defs[target.rsplit("/", 1)[-1]]
    return out


def commands_page() -> str:
    from claimgraph.core.commands import COMMANDS, ENVELOPE

    paths = {p for _, p, _ in operations()}
    lines = jsonl_schemas()
    out = [
        "# Command catalogue\n",
        GENERATED,
        "Every command type, from the one catalogue `claimgraph/core/commands.py`. Client "
        "commands are carried by JSON Lines (`claimgraph submit`), the HTTP routes "
        "`POST /v1/commands/<type>` and the SDK; the system's own records are refused from "
        "every client transport with a reason. Every command also carries the envelope "
        f"{', '.join(code(e) for e in ENVELOPE)}. The governor decides each one "
        "([Decisions and reasons](decisions.md)).\n",
        table(
            ["Type", "Sent by", "JSON Lines `type`", "HTTP route", "What it does"],
            [
                [
                    code(s.type),
                    s.sender.value,
                    ", ".join(code(n) for n in s.client_names) if s.client else "—",
                    code(f"POST /v1/commands/{s.type}")
                    if f"/v1/commands/{s.type}" in paths
                    else "—",
                    cell(s.summary),
                ]
                for s in COMMANDS.values()
            ],
        )
        + "\n",
    ]
    for s in COMMANDS.values():
        out.append(f"## {s.type}\n")
        out.append(md(s.summary) + "\n")
        versions = sorted(p.stem for p in (ROOT / "schemas" / "avro" / s.type).glob("v*.avsc"))
        avro = ", ".join(code(f"schemas/avro/{s.type}/{v}.avsc") for v in versions)
        out.append(
            f"Sent by: {s.sender.value}. Record fields after the envelope, in wire order: "
            f"{', '.join(code(f) for f in s.fields) or 'none'}. Avro: {avro or '—'}.\n"
        )
        for name in s.client_names if s.client else ():
            if name in lines:
                out.append(f'A JSON line `{{"type": "{name}", ...}}` takes:\n')
                out.append(properties_table({"components": {"schemas": {}}}, lines[name]) + "\n")
    return "\n".join(out)


def decisions_page() -> str:
    from claimgraph.core import model

    kinds = source_comments(ROOT / "claimgraph/core/model.py", "DecisionKind")
    reasons = source_comments(ROOT / "claimgraph/core/model.py", "Reason")
    groups = _comment_groups(ROOT / "claimgraph/core/model.py", "Reason")
    out = [
        "# Decisions and reason codes\n",
        GENERATED,
        "Every command gets exactly one decision, of one kind, with one reason code "
        "(`claimgraph.DecisionKind`, `claimgraph.Reason` in `claimgraph/core/model.py`). "
        "HTTP problem bodies carry the same codes.\n",
        "## Kinds\n",
        table(
            ["Kind", "Note"],
            [[code(k.value), cell(kinds.get(k.name, ""))] for k in model.DecisionKind],
        )
        + "\n",
        "## Reasons\n",
    ]
    rows = []
    for r in model.Reason:
        note = reasons.get(r.name, "")
        if note == groups.get(r.name):
            note = ""
        rows.append([code(r.value), cell(groups.get(r.name, "")), cell(note)])
    out.append(table(["Reason", "Group", "Note"], rows) + "\n")
    return "\n".join(out)


def _comment_groups(path: Path, cls: str) -> dict[str, str]:
    """Member → the ``# heading`` comment line above its run of members in class ``cls``."""
    text = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(text))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            heading = ""
            first = node.body[0].lineno if node.body else node.lineno
            for n in range(first, node.end_lineno or first):
                line = text[n - 1].strip()
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
                m = re.match(r"(\w+) = ", line)
                if m:
                    out[m.group(1)] = heading
    return out


# -- limits ------------------------------------------------------------------------------------

# What happens past each limit option. The option's help says what it bounds; this says what
# the caller gets. A test fails when a --max-* option (or a resolvers run limit) has no entry.
PAST: dict[tuple[str, str], str] = {
    ("submit", "--max-line"): "the line is an `invalid_input` record, rejected `malformed`; "
    "the rest of the line is read in chunks and dropped",
    ("submit", "--max-depth"): "`invalid_input`, measured by a linear scan before parsing",
    ("serve", "--max-body"): "413 `too_large`, before the token is checked: by "
    "`Content-Length` unread, or once a chunked body passes it; not recorded",
    ("serve", "--max-depth"): "422 `malformed`, before the body is parsed; not recorded",
    ("serve", "--max-requests"): "429 `too_many` at once (callers without a valid token share "
    "one pool); not recorded",
    ("serve", "--max-waits"): "429 `too_many` at once",
    ("serve", "--max-waits-total"): "429 `too_many` at once",
    ("serve", "--max-wait"): "409 `future_version`",
    ("serve", "--max-run-events"): "413 `too_large`; nothing of the request appended",
    ("serve", "--max-run-trace"): "413 `too_large` (counted per server process)",
    ("serve", "--max-run-bytes"): "413 `too_large` (counted per server process)",
    ("serve", "--max-batch"): "413 `too_large`; nothing of the request recorded (the SDK's "
    "`read_edges` raises `LimitError`)",
    ("serve", "--max-pins"): "429 `too_many`; nothing of the request pinned or appended",
    ("resolvers run", "--cel-max-steps"): "the rule does not apply (`RuleError` in its "
    "`passed` entry); the chain moves on",
    ("resolvers run", "--arbiter-max-output"): "`ArbiterError`; the command's process group is "
    "killed; the chain moves on",
    ("resolvers run", "--arbiter-max-timeout"): "caps the schema's `timeout`; at it the whole "
    "process group is killed",
}

# ``resolvers run`` takes None for "the library's default": the defaults it stands for.
LIBRARY_DEFAULTS: dict[tuple[str, str], Callable[[], object]] = {
    ("resolvers run", "--cel-max-steps"): lambda: _resolver_limits().rules.max_steps,
    ("resolvers run", "--arbiter-max-output"): lambda: _resolver_limits().max_output,
    ("resolvers run", "--arbiter-max-timeout"): lambda: _resolver_limits().max_timeout,
}


def _resolver_limits() -> Any:
    from claimgraph.service.resolvers import RESOLVER_LIMITS

    return RESOLVER_LIMITS


def command_at(path: str) -> Command:
    cmd = cli_root()
    for part in path.split():
        assert is_group(cmd), path
        cmd = cmd.commands[part]
    return cmd


# The commands whose --max-* options bound what a caller may cost (``paths --max-hops`` is a
# query's own parameter, bounded in QUERY_LIMITS).
LIMIT_COMMANDS = ("submit", "serve", "resolvers run")


def limit_options() -> list[tuple[str, Any]]:
    """(command, option) of every limit option: each ``*max-*`` option of LIMIT_COMMANDS."""
    return [
        (command, p)
        for command in LIMIT_COMMANDS
        for p in command_at(command).params
        if is_option(p) and any("max-" in o for o in p.opts)
    ]


def limits_rows() -> list[tuple[str, str, str, str]]:
    """(what it bounds, default, ``command --flag``, past it) for every limit option."""
    rows = []
    for command, p in limit_options():
        flag = max(p.opts, key=len)
        value = p.default
        if value is None:
            value = LIBRARY_DEFAULTS[(command, flag)]()
        help_text = re.sub(r"\s*\[default: [^]]*\]\.?", "", p.help or "").strip()
        rows.append((help_text, str(value), f"{command} {flag}", PAST[(command, flag)]))
    return rows


def _dataclass_rows(obj: Any, path: Path, prefix: str) -> list[list[str]]:
    notes = source_comments(path, type(obj).__name__)
    rows = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            continue
        rows.append([code(f"{prefix}.{f.name}"), code(value), cell(notes.get(f.name, ""))])
    return rows


def limits_page() -> str:
    from claimgraph.core.commands import COMMANDS
    from claimgraph.core.model import LIMITS
    from claimgraph.core.rules import RULE_LIMITS
    from claimgraph.mcp import server
    from claimgraph.service.queries import QUERY_LIMITS

    notes = source_comments(ROOT / "claimgraph/core/commands.py", "LIMITS")
    out = [
        "# Limits\n",
        GENERATED,
        "Every bound on what one input, one request or one principal may cost, with its "
        "default. Each is enforced before the work it bounds, and a refusal names the "
        "limit's option. Why, and what to do when you meet one: "
        "[Hostile input at the edges](../explanation/hostile-input.md).\n",
        "## Options\n",
        "The limits you can change, one option each (set them on the command line, with "
        "`CLAIMGRAPH_*`-free config keys such as `[serve] max-body = 4194304`, see "
        "[Configuration keys](configuration.md)).\n",
        table(
            ["What is bounded", "Default", "Option", "Past it"],
            [[cell(w), d, code(o), cell(p)] for w, d, o, p in limits_rows()],
        )
        + "\n",
        "## Fixed bounds\n",
        "Declared once in the code; the governor and every ingress enforce them.\n",
        "### One command (`LIMITS`, `claimgraph/core/commands.py`)\n",
        table(
            ["Key", "Value", "What it bounds"],
            [[code(k), code(v), cell(notes.get(k, ""))] for k, v in LIMITS.items()],
        )
        + "\n",
        "### Every field's domain (the command catalogue)\n",
        "The domain of each field of each command type, as declared in "
        "`claimgraph/core/commands.py`. Under rules revision 3 the governor rejects a command "
        "with a field outside it (`invalid_field`, `field_too_large` or `invalid_id`, naming "
        "the field and the bound) before any rule runs; HTTP, MCP, the SDK and the CLI "
        "commands refuse it with 422 / exit 4 and record nothing; `claimgraph submit` "
        "records the rejection.\n",
        table(
            ["Command", "Field", "Domain"],
            [
                [code(spec.type), code(name), cell(dom.describe())]
                for spec in COMMANDS.values()
                for name, dom in spec.domains.items()
            ],
        )
        + "\n",
        "### Resolver rules (`RuleLimits`, `claimgraph/core/rules.py`)\n",
        paragraphs(inspect.getdoc(type(RULE_LIMITS)) or "") + "\n",
        table(
            ["Field", "Value", "Note"],
            _dataclass_rows(RULE_LIMITS, ROOT / "claimgraph/core/rules.py", "RuleLimits"),
        )
        + "\n",
        "### Resolvers and arbiters (`ResolverLimits`, `claimgraph/service/resolvers.py`)\n",
        table(
            ["Field", "Value", "Note"],
            _dataclass_rows(
                _resolver_limits(), ROOT / "claimgraph/service/resolvers.py", "ResolverLimits"
            ),
        )
        + "\n",
        "### Queries beyond one hop (`QUERY_LIMITS`, `claimgraph/service/queries.py`)\n",
        table(["Key", "Value"], [[code(k), code(v)] for k, v in QUERY_LIMITS.items()]) + "\n",
        "A cut by `limit` or `expansions` is reported as `truncated` with `truncated_by` "
        "(deterministic, so a replay sees the same cut); a query past `seconds` raises "
        "`InputError` rather than answer short.\n",
        "### MCP and traces\n",
        table(
            ["Bound", "Value"],
            [
                ["claims per `write_claims` call", code(server.MAX_WRITE_CLAIMS)],
                ["edges per `read_edges` call", code(server.MAX_READ_EDGES)],
                ["characters of one trace event's payload", code(_trace_payload())],
            ],
        )
        + "\n",
    ]
    return "\n".join(out)


def _trace_payload() -> int:
    from claimgraph.http import bodies

    value: int = bodies.RUN_EVENT_PAYLOAD
    return value


# -- exit codes --------------------------------------------------------------------------------

_TREE_LINE = re.compile(
    r"^(?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w+)\s+(?P<exit>\d+)\s+(?P<http>\d{3}(?:/\d{3})*)"
    r"\s+(?P<what>\S.*)$"
)


def error_tree() -> list[tuple[int, str, int, list[int], str]]:
    """(depth, name, exit code, HTTP statuses, what) of each line of the tree drawn in
    ``claimgraph/errors.py`` (a test checks the drawing against the classes)."""
    from claimgraph import errors

    out = []
    for line in (errors.__doc__ or "").splitlines():
        m = _TREE_LINE.match(line)
        if m:
            statuses = [int(s) for s in m["http"].split("/")]
            out.append((len(m["indent"]) // 4, m["name"], int(m["exit"]), statuses, m["what"]))
    return out


def exit_codes_page() -> str:
    tree = error_tree()
    rows = []
    root = tree[0]
    rows.append(
        [
            "1",
            code(root[1]),
            cell(f"the root: every error below is one; {root[4].split(';', 1)[-1].strip()}"),
            "500",
        ]
    )
    rows.append(
        [
            "1",
            "—",
            "a write was decided `rejected`: its receipt is printed (`submit` only with "
            "`--strict`)",
            "the reason's",
        ]
    )
    i = 1
    while i < len(tree):
        _, name, exit_code, statuses, what = tree[i]
        members = []
        j = i + 1
        while j < len(tree) and tree[j][0] > 1:
            members.append(tree[j])
            j += 1
        meaning = what + "".join(f"; `{m[1]}`: {m[4]}" for m in members)
        all_statuses = sorted({s for s in statuses} | {s for m in members for s in m[3]})
        rows.append([str(exit_code), code(name), cell(meaning), ", ".join(map(str, all_statuses))])
        i = j
    rows.append(
        [
            "70",
            "—",
            "an internal error (a bug): one line, or the traceback with `CLAIMGRAPH_DEBUG=1`",
            "500",
        ]
    )
    rows.append(["130", "—", "interrupted (Ctrl-C)", "—"])
    return "\n".join(
        [
            "# Exit codes and HTTP statuses\n",
            GENERATED,
            "Errors form one tree rooted at `claimgraph.ClaimgraphError` (drawn in "
            "`claimgraph/errors.py`): one family per kind of failure. The CLI prints one "
            "line and exits with the family's code; the HTTP API answers with the family's "
            "status, as an `application/problem+json` body with a reason code. A usage error "
            "(an unknown option, a missing argument) exits 2, as a `ConfigError` does.\n",
            table(["Exit", "Error", "Meaning", "HTTP"], rows) + "\n",
        ]
    )


# -- metrics -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _StubGraph:
    """Enough of a graph for the HTTP metrics' collector to name what it exports."""

    name: str = "GRAPH"

    def head(self) -> int:
        return 0

    def quarantine(self) -> list[object]:
        return []


def _families(registry: Any) -> list[tuple[str, str, str, list[str]]]:
    """(exposed name, type, help, labels) of every metric of a registry but process_*."""
    out = []
    for collector in list(registry._collector_to_names):  # prometheus_client's own registry
        name = getattr(collector, "_name", None)
        if name is not None:
            kind = collector._type
            shown = f"{name}_total" if kind == "counter" else name
            out.append((shown, kind, collector._documentation, list(collector._labelnames)))
            continue
        if type(collector).__module__.startswith("prometheus_client"):
            continue  # process_* and python_*: the client library's own
        for fam in collector.collect():
            labels = list(getattr(fam, "_labelnames", ())) or sorted(
                {k for s in fam.samples for k in s.labels}
            )
            out.append((fam.name, fam.type, fam.documentation, labels))
    return out


def metric_sets() -> list[tuple[str, str, list[tuple[str, str, str, list[str]]]]]:
    from claimgraph.http.observe import HttpMetrics
    from claimgraph.streams.metrics import GovernorMetrics, ProjectorMetrics

    http = HttpMetrics(_StubGraph())  # type: ignore[arg-type]
    governor = GovernorMetrics(None, 0)
    projector = ProjectorMetrics(None, "GRAPH")
    return [
        ("serve", "`GET /metrics` of `claimgraph serve`", _families(http.registry)),
        ("governor", "`claimgraph governor --metrics-port N`", _families(governor.registry)),
        ("projector", "`claimgraph projector --metrics-port N`", _families(projector.registry)),
    ]


def metrics_page() -> str:
    out = [
        "# Metrics\n",
        GENERATED,
        "Every Prometheus metric each process exports, from its registry. Each also exports "
        "the client library's `process_*` and `python_*` metrics. What they mean in "
        "operation: [Monitor](../how-to/observe.md).\n",
    ]
    for _, where, fams in metric_sets():
        out.append(f"## {where}\n")
        out.append(
            table(
                ["Metric", "Type", "Labels", "What it measures"],
                [
                    [code(n), t, ", ".join(code(x) for x in labels), cell(h)]
                    for n, t, h, labels in fams
                ],
            )
            + "\n"
        )
    return "\n".join(out)


# -- configuration -----------------------------------------------------------------------------

# Environment variables read outside the CLI's options (a test fails when the package reads one
# this table does not name).
ENVIRONMENT: dict[str, str] = {
    "CLAIMGRAPH_DEBUG": "set (to anything): an internal error prints its traceback instead "
    "of one line",
    "CLAIMGRAPH_WRITER_WAIT": "seconds a CLI write waits for a data directory's writer to "
    "announce itself before it fails with exit 8 (default {writer_wait})",
    "CLAIMGRAPH_PURE": "`1`: use the pure-Python core even when the native core is installed",
    "CLAIMGRAPH_STATE_CLAIMS": "N: keep the newest ~N claims of the fold state in memory and "
    "spill older chunks to a scratch RocksDB (native core only; default: no spill)",
    "CLAIMGRAPH_STATE_CACHE_MIB": "the spill's block cache in MiB (default 32)",
    "CLAIMGRAPH_STATE_SPILL_DIR": "where the spill's scratch RocksDB goes (default: the "
    "system's temporary directory)",
    "CLAIMGRAPH_KAFKA_*": "a librdkafka property: `CLAIMGRAPH_KAFKA_SASL_PASSWORD` sets "
    "`sasl.password` (`_` spells `.`, `__` spells `_`)",
}


def _environment() -> dict[str, str]:
    from claimgraph.service.attached import WRITER_WAIT

    return {k: v.format(writer_wait=WRITER_WAIT) for k, v in ENVIRONMENT.items()}


def option_envvars() -> dict[str, str]:
    """Every environment variable a CLI option reads → where (``--flag`` of a command)."""
    out: dict[str, str] = {}
    root = cli_root()
    for path, cmd in [((), root), *walk_cli(root)]:
        for p in cmd.params:
            envs = [p.envvar] if isinstance(p.envvar, str) else list(p.envvar or [])
            for e in envs:
                where = " ".join(("claimgraph", *path, max(p.opts, key=len)))
                out.setdefault(e, where)
    return out


def configuration_page() -> str:
    from claimgraph.cli.config import KAFKA_GROUP_COMMANDS, global_options

    root = cli_root()
    rows = []
    for name, p in global_options(root).items():
        env = code(p.envvar) if isinstance(p.envvar, str) else ""
        rows.append([code(name), code(max(p.opts, key=len)), env, _default(p), cell(p.help)])
    tables = []
    for path, cmd in walk_cli(root):
        if is_group(cmd):
            continue
        keys = sorted(
            f[2:]
            for p in cmd.params
            if is_option(p) and p.name != "help"
            for f in p.opts
            if f.startswith("--")
        )
        if keys:
            tables.append([code(f"[{'.'.join(path)}]"), ", ".join(code(k) for k in keys)])
    env_rows = [[code(k), "the option " + code(v)] for k, v in option_envvars().items()]
    env_rows += [[code(k), cell(v)] for k, v in _environment().items()]
    return "\n".join(
        [
            "# Configuration keys\n",
            GENERATED,
            "Every option has one name in three places, and the first that sets it wins: "
            "**flag > environment > file > default**. The file is TOML, named by `--config "
            "FILE` (`-c`) or `CLAIMGRAPH_CONFIG` (none is read unless named); "
            "`claimgraph config show` prints every value in force and where it came from. "
            "How to use them: [Configure](../how-to/configure.md).\n",
            "## Top-level keys: the global options\n",
            table(["Key", "Flag", "Environment", "Default", "What it sets"], rows) + "\n",
            "## `[kafka]`: Kafka client properties\n",
            "Any librdkafka property, for every Kafka client of every process (governor, "
            "projector, the CLI, `serve`): TOML's dotted keys are the property names "
            '(`sasl.username = "claimgraph"`); also `CLAIMGRAPH_KAFKA_*` in the '
            "environment and `-X KEY=VALUE` on the command line. The sub-tables "
            f"{', '.join(code(f'[kafka.{c}]') for c in KAFKA_GROUP_COMMANDS)} hold the "
            "options of those `kafka` commands instead.\n",
            "## Command tables\n",
            "A command's options go in a table named after it, spelled as the flag without "
            "its dashes (`[serve]` `max-body = 4096`; `[resolvers.run]`). A key the table "
            "does not know exits 2 naming it and what the table has. The options themselves "
            "are described in the [command line reference](cli.md).\n",
            table(["Table", "Keys"], tables) + "\n",
            "## Environment variables\n",
            "Those the options read, and those the package reads itself.\n",
            table(["Variable", "What it sets"], env_rows) + "\n",
        ]
    )


# -- reads: the query catalogue ----------------------------------------------------------------


def _catalogue_rows() -> list[list[str]]:
    from claimgraph.core.queries import QUERIES

    rows = []
    for s in QUERIES.values():
        params = ", ".join(
            code(p.name if p.required else f"{p.name}={p.default!r}") for p in s.all_params
        )
        rows.append(
            [
                code(s.name),
                params or "—",
                code(s.result),
                code(f"{'POST' if s.post else 'GET'} {s.route}"),
                code(s.mcp) if s.mcp else "—",
                code(f"claimgraph {s.cli}") if s.cli else "—",
                "yes" if s.traced else "no",
                s.cut.value,
                cell(s.summary),
            ]
        )
    return rows


def queries_page() -> str:
    from claimgraph.mcp.toolspec import mcp_tools

    reads = [
        (m, p, op)
        for m, p, op in operations()
        if (op.get("tags") or [""])[0] == "reads" and p.startswith("/v1/")
    ]
    cli_reads = [
        (path, cmd)
        for path, cmd in walk_cli()
        if len(path) == 1 and getattr(cmd, "rich_help_panel", None) == "Read"
    ]
    read_tools = [t for t in mcp_tools() if t["name"] in _READ_TOOLS]
    return "\n".join(
        [
            "# Reads and queries\n",
            GENERATED,
            "## Query catalogue\n",
            "Every read is declared once, in `claimgraph/core/queries.py`: its parameters "
            "with their bounds and defaults, its result, whether a run traces it (and replay "
            "re-executes it), and how its answer says it was cut (`horizon`: `cut_below`; "
            "`limit`: `truncated`/`truncated_by`; `page`: `next_cursor`; `absent`: none / "
            "404). The SDK methods (sync and async), the HTTP routes, the MCP tools and the "
            "CLI commands below are made from it ([how-to: queries](../how-to/queries.md)).\n",
            table(
                [
                    "Read",
                    "Parameters",
                    "Result",
                    "HTTP",
                    "MCP tool",
                    "CLI",
                    "Traced",
                    "Cut",
                    "What it answers",
                ],
                _catalogue_rows(),
            )
            + "\n",
            "## HTTP read routes\n",
            table(
                ["Route", "What it answers"],
                [
                    [code(f"{m} {p}"), cell(_first(op.get("description") or op.get("summary")))]
                    for m, p, op in reads
                ],
            )
            + "\n",
            "Parameters and answers: [HTTP API](http.md).\n",
            "## CLI reads\n",
            table(
                ["Command", "What it prints"],
                [[code("claimgraph " + " ".join(p)), cell(_first(c.help))] for p, c in cli_reads],
            )
            + "\n",
            "## MCP read tools\n",
            table(
                ["Tool", "What it answers"],
                [[code(t["name"]), cell(_first(t["description"]))] for t in read_tools],
            )
            + "\n",
        ]
    )


_READ_TOOLS = (
    "read_edge",
    "read_edges",
    "read_slot",
    "neighbors",
    "find_paths",
    "reach",
    "conflicts_near",
)


def _first(text: str | None) -> str:
    from claimgraph.cli.common import first_sentence

    return first_sentence(text)


# -- the Python API ----------------------------------------------------------------------------


def python_page() -> str:
    import claimgraph
    from claimgraph.service.port import GraphAPI, GraphPort

    rows = []
    for name in claimgraph.__all__:
        obj = getattr(claimgraph, name)
        if name == "__version__":
            continue
        kind = "class" if inspect.isclass(obj) else "function"
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            kind = "error"
        rows.append([code(name), kind, cell(first_line(obj))])

    def methods_of(cls: type, skip: frozenset[str] = frozenset()) -> list[str]:
        out = []
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") or name in skip:
                continue
            sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
            out.append(f"- `{name}{sig}`" + (f" — {md(first_line(fn))}" if fn.__doc__ else ""))
        return out

    port = methods_of(GraphPort)
    methods = methods_of(GraphAPI, frozenset(n for n, _ in inspect.getmembers(GraphPort)))
    return "\n".join(
        [
            "# Python API\n",
            GENERATED,
            "What `import claimgraph` exports (its `__all__`), and the methods of a graph: "
            "`claimgraph.open(path)` (embedded), `claimgraph.connect(url, token=...)` (HTTP) "
            "and the Kafka graph share one interface, `GraphAPI`: the narrow port `GraphPort` "
            "(`claimgraph/service/port.py`) and what is derived over it from the command and "
            "query catalogues (a writer per client command, a typed read per catalogued "
            "read, runs). The async SDK (`await claimgraph.aopen(path)`, "
            "`await claimgraph.aconnect(url, token=...)`) has the same methods, each "
            "awaited, and closes with `await g.aclose()` (or `async with`).\n",
            "## Exports\n",
            table(["Name", "Kind", "What it is"], rows) + "\n",
            "## The port (`GraphPort`)\n",
            "\n".join(port) + "\n",
            "## A graph's methods (`GraphAPI`)\n",
            "\n".join(methods) + "\n",
        ]
    )


# -- all pages ---------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/http.md": http_page,
    "reference/mcp.md": mcp_page,
    "reference/python.md": python_page,
    "reference/commands.md": commands_page,
    "reference/queries.md": queries_page,
    "reference/decisions.md": decisions_page,
    "reference/limits.md": limits_page,
    "reference/exit-codes.md": exit_codes_page,
    "reference/metrics.md": metrics_page,
    "reference/configuration.md": configuration_page,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="directory to write the pages to")
    args = ap.parse_args()
    for rel, page in PAGES.items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page(), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
