"""The CLI's read and write commands, made from the two catalogues.

Reads come from the query catalogue (:mod:`claimgraph.core.queries`).

Every read with a ``cli`` name is a command whose arguments and options are its parameters,
declared once in the catalogue: a required parameter is an argument, the others options named
``--<name>`` (or the parameter's ``cli`` flag), with the catalogue's defaults and help; ``--at``
and ``--wait`` where the read takes them, and ``--json``. A time parameter also takes ISO 8601
text, an enum marked ``switch`` is one flag. What the CLI writes by hand is only how each answer
is printed: a renderer per read (``@renders(name)``), given the graph and the parameters by
their Python keywords.

Writes come from the write catalogue (:mod:`claimgraph.core.writes`) by :func:`write_command`:
the write's positional parameters are arguments, the others options as for reads (a required
one with a ``cli`` flag a required option); a list is a repeatable option, a map a repeatable
``key=value`` option, bytes are hex, a time is ms or ISO 8601. Every write command also takes
``--agent`` (required, except for an admin's command, where it is ``admin``), ``--task`` where
the write has one, ``--id`` (its command id: a retry with the same id is a duplicate),
``--sign-with`` and ``--json``, prints its receipt and exits 1 when it was rejected.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from claimgraph.cli.common import (
    AgentOpt,
    AtOpt,
    JsonOpt,
    TaskOpt,
    WaitOpt,
    graph_session,
    print_receipt,
    when,
)
from claimgraph.core.commands import COMMANDS, Kind, Sender, cut
from claimgraph.core.queries import QUERIES, Param, QuerySpec
from claimgraph.core.writes import WriteSpec
from claimgraph.errors import InputError

__all__ = [
    "AGENT",
    "CLI_WRITES",
    "Renderer",
    "add_reads",
    "add_write",
    "cli_value",
    "flags",
    "read_command",
    "renders",
    "write_command",
]

F = TypeVar("F", bound=Callable[..., None])


@dataclass(frozen=True, slots=True)
class Renderer:
    """How the CLI prints one read: ``render(g, params, at=, wait=, as_json=)``."""

    render: Callable[..., None]
    doc: str  # the command's help (first line: its summary)
    optional: tuple[str, ...] = ()  # required parameters the command may leave out (get's object)


RENDERERS: dict[str, Renderer] = {}


def renders(name: str, *, optional: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Register the function as the printer of the catalogued read ``name``; its docstring is
    the command's help."""

    def deco(fn: F) -> F:
        RENDERERS[name] = Renderer(fn, inspect.getdoc(fn) or QUERIES[name].summary, optional)
        return fn

    return deco


def flag(p: Param) -> str:
    """The option a parameter is on the command line."""
    return flags(p)[0]


def flags(p: Param) -> tuple[str, ...]:
    """Its option's names: the long one first, then any short form (``--evidence -e``)."""
    return tuple(p.cli.split()) if p.cli else ("--" + (p.http or p.name).replace("_", "-"),)


def _help(p: Param) -> str:
    d = p.domain
    text = p.doc or d.describe()
    if p.switch:
        return f"{p.name.replace('_', ' ').capitalize()} {_other(p)} (default: {p.default}): {text}"
    if d.kind is Kind.ENUM:
        text += f" ({', '.join(d.values)})"
    if (p.time or d.kind is Kind.TIME) and "ISO" not in text:
        text += " ISO 8601 text is taken too."
    if d.kind is Kind.MAP:
        text += " As key=value, repeatable."
    elif d.kind is Kind.LIST:
        text += " Repeatable."
    elif d.kind is Kind.BYTES and "hex" not in text:
        text += " As hex."
    return text


def _other(p: Param) -> str:
    """The value a switch picks: the enum's value that is not the default."""
    (value,) = [v for v in p.domain.values if v != p.default]
    return value


def _parameter(p: Param, optional: bool) -> inspect.Parameter:
    """One catalogued parameter as a typer argument or option."""
    P = inspect.Parameter
    help_ = _help(p)
    if p.required:
        if optional:
            meta = f"[{p.name.upper()}]"
            t: Any = Annotated[str | None, typer.Argument(metavar=meta, help=help_)]
            return P(p.keyword, P.POSITIONAL_OR_KEYWORD, default=None, annotation=t)
        name = p.name if p.py else None  # its name, not its Python keyword
        t = Annotated[str, typer.Argument(help=help_, metavar=name)]
        return P(p.keyword, P.POSITIONAL_OR_KEYWORD, annotation=t)
    if p.switch:
        t, default = Annotated[bool, typer.Option(flag(p), help=help_)], False
    else:
        t, default = _option(p, help_, p.default)
    return P(p.keyword, P.POSITIONAL_OR_KEYWORD, default=default, annotation=t)


def _option(p: Param, help_: str, value: Any) -> tuple[Any, Any]:
    """A parameter as an option: its typer annotation and default, for the default ``value``
    (``...``: a required option). A list or a map is repeatable text, a time or bytes text
    that :func:`cli_value` converts, a bool a flag, a number its type."""
    d, names = p.domain, flags(p)
    if d.kind is Kind.BOOL:
        return Annotated[bool, typer.Option(*names, help=help_)], value
    if d.kind in (Kind.LIST, Kind.MAP):
        return Annotated[list[str] | None, typer.Option(*names, help=help_)], None
    if d.kind in (Kind.TIME, Kind.BYTES) or p.time:
        text: Any = str if value is ... else str | None
        return Annotated[text, typer.Option(*names, help=help_)], value if value is ... else None
    base: Any = {Kind.INT: int, Kind.TIME: int, Kind.FLOAT: float}.get(d.kind, str)
    if value is None:
        base = base | None
    return Annotated[base, typer.Option(*names, help=help_)], value


def cli_value(p: Param, value: Any) -> Any:
    """What a command-line value is as the read's parameter."""
    if p.switch:
        return _other(p) if value else p.default
    if p.time or p.domain.kind is Kind.TIME:
        try:
            return when(value)
        except InputError as exc:
            raise InputError(f"{flag(p)}: {exc}") from None
    if p.domain.kind is Kind.LIST:
        return list(value) if value else None
    return value


def read_command(spec: QuerySpec, renderer: Renderer) -> Callable[..., None]:
    """The typer command of a catalogued read: its parameters from the catalogue, its output
    from ``renderer``."""

    def command(**kw: Any) -> None:
        at, wait, as_json = kw.pop("at", None), kw.pop("wait", 0.0), kw.pop("as_json", False)
        params = {p.keyword: cli_value(p, kw[p.keyword]) for p in spec.params}
        with graph_session() as g:
            renderer.render(g, params, at=at, wait=wait, as_json=as_json)

    P = inspect.Parameter
    params = [_parameter(p, p.name in renderer.optional) for p in spec.params]
    if spec.versioned:
        params.append(P("at", P.POSITIONAL_OR_KEYWORD, default=None, annotation=AtOpt))
    if spec.waits:
        params.append(P("wait", P.POSITIONAL_OR_KEYWORD, default=0.0, annotation=WaitOpt))
    params.append(P("as_json", P.POSITIONAL_OR_KEYWORD, default=False, annotation=JsonOpt))
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = renderer.doc
    command.__name__ = spec.cli
    return command


def add_reads(
    root: typer.Typer,
    catalogue: Mapping[str, QuerySpec] = QUERIES,
    renderers: Mapping[str, Renderer] | None = None,
) -> list[str]:
    """Add a command for every read of ``catalogue`` with a ``cli`` name (its printer from
    ``renderers``, default the registered ones); the command names, in order."""
    renderers = RENDERERS if renderers is None else renderers
    added = []
    for spec in catalogue.values():
        if not spec.cli:
            continue
        renderer = renderers.get(spec.name)
        if renderer is None:
            raise AssertionError(f"read {spec.name} names CLI command {spec.cli}: no @renders")
        root.command(spec.cli, rich_help_panel="Read")(read_command(spec, renderer))
        added.append(spec.cli)
    return added


# -- writes -----------------------------------------------------------------------------------

AGENT = object()  # a CLI default that stands for the command's --agent (resolve's resolver)
CLI_WRITES: dict[str, str] = {}  # CLI command (``key register``) → the write it sends

SignOpt = Annotated[
    Path | None,
    typer.Option(
        "--sign-with", help="Sign the command with this private key (a graph with keys needs it)."
    ),
]
IdOpt = Annotated[
    str | None,
    typer.Option(
        "--id", help="The command id (default: a new one); a retry with the same id is a duplicate."
    ),
]


def _write_parameter(p: Param, default: object, many: bool) -> list[inspect.Parameter]:
    """One write parameter as a typer argument or option (two for a ``cli_none`` one)."""
    P = inspect.Parameter
    help_, names = _help(p), flags(p)
    required = p.required and default is _UNSET
    if required and p.positional and not p.cli:
        meta = p.name if p.py else None
        t: Any = Annotated[list[str] if many else str, typer.Argument(help=help_, metavar=meta)]
        return [P(p.keyword, P.KEYWORD_ONLY, annotation=t)]
    if p.cli_none:
        t = Annotated[str | None, typer.Option(*names, help=help_)]
        none_t = Annotated[
            bool, typer.Option(p.cli_none, help=f"Send no {p.name} (see {flag(p)}).")
        ]
        return [
            P(p.keyword, P.KEYWORD_ONLY, default=None, annotation=t),
            P(_none_key(p), P.KEYWORD_ONLY, default=False, annotation=none_t),
        ]
    value: Any = ... if required else (p.default if default is _UNSET else default)
    if value is AGENT:
        help_, value = help_ + " (default: the --agent)", None
    t, value = _option(p, help_, value)
    if value is ...:
        return [P(p.keyword, P.KEYWORD_ONLY, annotation=t)]
    return [P(p.keyword, P.KEYWORD_ONLY, default=value, annotation=t)]


_UNSET = object()


def _is_argument(q: inspect.Parameter) -> bool:
    return any(
        isinstance(m, typer.models.ArgumentInfo) for m in getattr(q.annotation, "__metadata__", ())
    )


def _none_key(p: Param) -> str:
    return "none_" + p.keyword


def _write_value(p: Param, value: Any, kw: Mapping[str, Any]) -> Any:
    """What a command-line value is as the write's parameter."""
    if p.cli_none:
        if (value is None) == (not kw[_none_key(p)]):
            raise InputError(f"give exactly one of {flag(p)} or {p.cli_none}")
        return value
    if value is None:
        return None
    kind = p.domain.kind
    if kind is Kind.MAP:
        out = {}
        for item in value:
            k, sep, v = item.partition("=")
            if not sep:
                raise InputError(f"{flag(p)} {cut(item)}: expected key=value")
            out[k] = v
        return out
    if kind is Kind.LIST:
        return list(value)
    if kind is Kind.BYTES:
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise InputError(f"{p.name} must be hex, e.g. 8f2a...: {cut(value)}") from None
    if p.time or kind is Kind.TIME:
        return cli_value(p, value)
    return value


def write_command(
    spec: WriteSpec,
    doc: str | None = None,
    *,
    defaults: Mapping[str, object] | None = None,
    many: str = "",
    name: str = "",
) -> Callable[..., None]:
    """The typer command of a catalogued write, named ``name`` on the command line.

    ``defaults`` are the command line's own defaults (``AGENT``: the --agent), which make a
    required parameter an option; ``many``: a parameter the command takes one or more of,
    sending one write each (erase's claim ids)."""
    defaults = defaults or {}
    params = [p for p in spec.params if p.name not in spec.fixed]
    admin = COMMANDS[spec.command].sender is Sender.ADMIN

    def command(**kw: Any) -> None:
        agent = kw.pop("agent")
        envelope: dict[str, Any] = {"agent": agent, "command_id": kw.pop("command_id")}
        if spec.task:
            envelope["task"] = kw.pop("task")
        sign_with, as_json = kw.pop("sign_with"), kw.pop("as_json")
        own: dict[str, Any] = {}
        for p in params:
            value = _write_value(p, kw[p.keyword], kw)
            if value is None and defaults.get(p.name) is AGENT:
                value = agent
            if value is None and not p.required and p.default is not None:
                continue  # not given (a list, a time): the catalogue's default
            own[p.keyword] = value
        each = own.pop(many) if many else [None]
        failed = False
        with graph_session() as g:
            if sign_with is not None:
                from claimgraph.service.signers import Signer

                g.signer = Signer.load(sign_with)
            for one in each:
                args = {**own, many: one} if many else own
                r = g.write(spec.name, **args, **envelope)
                print_receipt(r, as_json)
                failed = failed or r.kind == "rejected"
        if failed:
            raise typer.Exit(1)

    sig: list[inspect.Parameter] = []
    for p in params:
        sig += _write_parameter(p, defaults.get(p.name, _UNSET), p.name == many)
    P = inspect.Parameter
    arguments = [q for q in sig if q.default is P.empty and _is_argument(q)]
    envelope = [
        P("agent", P.KEYWORD_ONLY, default="admin" if admin else P.empty, annotation=AgentOpt)
    ]
    if spec.task:
        envelope.append(P("task", P.KEYWORD_ONLY, default="", annotation=TaskOpt))
    sig = [*arguments, *envelope, *(q for q in sig if q not in arguments)]
    sig.append(P("command_id", P.KEYWORD_ONLY, default=None, annotation=IdOpt))
    sig.append(P("sign_with", P.KEYWORD_ONLY, default=None, annotation=SignOpt))
    sig.append(P("as_json", P.KEYWORD_ONLY, default=False, annotation=JsonOpt))
    command.__signature__ = inspect.Signature(sig)  # type: ignore[attr-defined]
    command.__doc__ = doc or spec.summary
    command.__name__ = (name or spec.name).replace(" ", "_")
    CLI_WRITES[name or spec.name] = spec.name
    return command


def add_write(
    root: typer.Typer,
    name: str,
    write: str,
    doc: str | None = None,
    *,
    panel: str | None = None,
    path: str = "",
    **kw: Any,
) -> None:
    """Add the command ``name`` to ``root``, sending the catalogued write ``write``
    (``path``: its full name when ``root`` is a sub-command group, ``key register``)."""
    from claimgraph.core.writes import WRITES

    command = write_command(WRITES[write], doc, name=path or name, **kw)
    if panel:
        root.command(name, rich_help_panel=panel)(command)
    else:
        root.command(name)(command)
