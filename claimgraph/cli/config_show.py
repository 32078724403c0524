"""``claimgraph config show``: the effective configuration and where each value came from."""

from __future__ import annotations

from typing import Any

import typer

from claimgraph.cli.common import CTX, HelpGroup, JsonOpt, emit, say
from claimgraph.cli.config import Setting, mask

__all__ = ["config_app", "effective", "register"]

config_app = typer.Typer(
    cls=HelpGroup,
    help="The configuration: flags > CLAIMGRAPH_* environment > --config FILE > defaults.",
    no_args_is_help=True,
)


def effective() -> dict[str, Setting]:
    """Every value in force: the global options, Kafka client properties (``kafka.KEY``) and
    the command options the config file sets (``serve.max_body``), secrets masked."""
    out: dict[str, Setting] = {}
    for key, s in CTX.sources.items():
        value: Any = str(s.value) if s.value is not None else None
        out[key] = Setting(value, s.source)
    for key in sorted(CTX.kafka_settings):
        s = CTX.kafka_settings[key]
        out[f"kafka.{key}"] = Setting(mask(key, s.value), s.source)
    where = f"file {CTX.config.path}"
    for key, value in sorted(CTX.config.command_settings().items()):
        out[key] = Setting(mask(key, value), where)
    return out


@config_app.command("show")
def config_show(as_json: JsonOpt = False) -> None:
    """Print the effective configuration, each value with its source (secrets masked)."""
    values = effective()
    if as_json:
        emit({k: {"value": s.value, "source": s.source} for k, s in values.items()})
        return
    width = max(len(k) for k in values)
    for key, s in values.items():
        shown = "-" if s.value is None else str(s.value)
        say(f"{key:<{width}}  {shown}  ({s.source})")


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config", rich_help_panel="Start")
