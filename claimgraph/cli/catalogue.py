"""The CLI's read commands, made from the query catalogue (:mod:`claimgraph.core.queries`).

Every read with a ``cli`` name is a command whose arguments and options are its parameters,
declared once in the catalogue: a required parameter is an argument, the others options named
``--<name>`` (or the parameter's ``cli`` flag), with the catalogue's defaults and help; ``--at``
and ``--wait`` where the read takes them, and ``--json``. A time parameter also takes ISO 8601
text, an enum marked ``switch`` is one flag. What the CLI writes by hand is only how each answer
is printed: a renderer per read (``@renders(name)``), given the graph and the parameters by
their Python keywords.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from claimgraph.cli.common import AtOpt, JsonOpt, WaitOpt, graph_session
from claimgraph.core.commands import Kind, cut
from claimgraph.core.queries import QUERIES, Param, QuerySpec
from claimgraph.errors import InputError

__all__ = ["Renderer", "add_reads", "cli_value", "read_command", "renders"]

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


def _ms(value: str | None) -> int | None:
    from claimgraph.service.inputs import to_millis

    if value is None:
        return None
    try:
        return to_millis(int(value) if value.isdigit() else value)
    except ValueError as exc:
        raise InputError(f"{cut(value)} is not a time: {exc}") from None


def flag(p: Param) -> str:
    """The option a parameter is on the command line."""
    return p.cli or "--" + (p.http or p.name).replace("_", "-")


def _help(p: Param) -> str:
    d = p.domain
    text = p.doc or d.describe()
    if p.switch:
        return f"{p.name.replace('_', ' ').capitalize()} {_other(p)} (default: {p.default}): {text}"
    if d.kind is Kind.ENUM:
        text += f" ({', '.join(d.values)})"
    if p.time:
        text += " ISO 8601 text is taken too."
    return text


def _other(p: Param) -> str:
    """The value a switch picks: the enum's value that is not the default."""
    (value,) = [v for v in p.domain.values if v != p.default]
    return value


def _parameter(p: Param, optional: bool) -> inspect.Parameter:
    """One catalogued parameter as a typer argument or option."""
    P = inspect.Parameter
    d, help_ = p.domain, _help(p)
    if p.required:
        if optional:
            meta = f"[{p.name.upper()}]"
            t: Any = Annotated[str | None, typer.Argument(metavar=meta, help=help_)]
            return P(p.keyword, P.POSITIONAL_OR_KEYWORD, default=None, annotation=t)
        name = p.name if p.py else None  # its name, not its Python keyword
        t = Annotated[str, typer.Argument(help=help_, metavar=name)]
        return P(p.keyword, P.POSITIONAL_OR_KEYWORD, annotation=t)
    default: Any = p.default
    if p.switch:
        t, default = Annotated[bool, typer.Option(flag(p), help=help_)], False
    elif d.kind is Kind.BOOL:
        t = Annotated[bool, typer.Option(flag(p), help=help_)]
    elif d.kind is Kind.LIST:
        t = Annotated[list[str] | None, typer.Option(flag(p), help=help_)]
    elif p.time:
        t = Annotated[str | None, typer.Option(flag(p), help=help_)]
    else:
        base: Any = {Kind.INT: int, Kind.TIME: int, Kind.FLOAT: float}.get(d.kind, str)
        if default is None:
            base = base | None
        t = Annotated[base, typer.Option(flag(p), help=help_)]
    return P(p.keyword, P.POSITIONAL_OR_KEYWORD, default=default, annotation=t)


def cli_value(p: Param, value: Any) -> Any:
    """What a command-line value is as the read's parameter."""
    if p.switch:
        return _other(p) if value else p.default
    if p.time:
        return _ms(value)
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
