"""One configuration story: flags, ``CLAIMGRAPH_*`` environment variables and a TOML file.

Every value has one name in the three places, and the first that sets it wins:
**flag > environment > file > default**.

* The global options (``--data``, ``--bootstrap``, ``--graph``, ``--prefix``) are top-level
  keys of the file (``data = "./g"``) and ``CLAIMGRAPH_DATA`` ... in the environment.
* A command's options are keys of a table named after the command (``[serve]``,
  ``[resolvers.run]``, ``[kafka.init]``), spelled as the option without its dashes
  (``max-body = 4096``); they reach the command through click's ``default_map``, so a flag
  still overrides them.
* Logging (``--log-level``, ``--log-format``, ``--log-interval``) is global too:
  ``log-level = "info,kafka=warning"`` in the file, ``CLAIMGRAPH_LOG_LEVEL`` ... in the
  environment (:mod:`claimgraph.logconf`, docs/logging.md).
* Kafka client (librdkafka) properties — SASL, TLS, timeouts, any of them — are keys of the
  ``[kafka]`` table (``sasl.password = "..."``; TOML's dotted keys are the property names),
  ``CLAIMGRAPH_KAFKA_SASL_PASSWORD`` in the environment (``_`` is ``.``, ``__`` is ``_``) and
  ``-X sasl.password=...`` on the command line. Every Kafka client of every process (governor,
  projector, CLI, serve) is configured from them.

The file is ``--config FILE`` or ``CLAIMGRAPH_CONFIG``; none is read unless named.
``claimgraph config show`` prints the effective configuration and where each value came
from, with secrets masked.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimgraph.errors import ConfigError

__all__ = [
    "ENV_KAFKA",
    "KAFKA_GROUP_COMMANDS",
    "NOT_IN_FILE",
    "ConfigFile",
    "Setting",
    "global_options",
    "is_secret",
    "kafka_from_env",
    "kafka_from_flags",
    "load_file",
    "mask",
]

# root options that are not configuration values themselves
NOT_IN_FILE = ("config", "kafka_property", "version")
ENV_KAFKA = "CLAIMGRAPH_KAFKA_"
# tables under [kafka] that hold a kafka subcommand's options, not librdkafka properties
KAFKA_GROUP_COMMANDS = ("init", "place", "status")
MAX_FILE_BYTES = 1 << 20
_SECRET = re.compile(r"(password|secret|token|\.pem$|^ssl\.key$|jaas)", re.IGNORECASE)


@dataclass(frozen=True)
class Setting:
    """One effective value and where it came from (``flag``, ``env NAME``, ``file PATH``)."""

    value: Any
    source: str


@dataclass
class ConfigFile:
    """A parsed config file: global keys, librdkafka properties, per-command defaults."""

    path: Path | None = None
    globals: dict[str, Any] = field(default_factory=dict)
    kafka: dict[str, str] = field(default_factory=dict)
    commands: dict[str, Any] = field(default_factory=dict)  # click default_map shape

    def default_map(self) -> dict[str, Any]:
        return {**self.globals, **self.commands}

    def command_settings(self) -> dict[str, Any]:
        """``serve.max_body`` → value: every command option the file sets, flattened."""
        out: dict[str, Any] = {}

        def walk(prefix: str, table: Mapping[str, Any]) -> None:
            for k, v in table.items():
                if isinstance(v, dict):
                    walk(f"{prefix}{k}.", v)
                else:
                    out[f"{prefix}{k}"] = v

        walk("", self.commands)
        return out


def is_secret(key: str) -> bool:
    """Whether a value must never be printed (passwords, secrets, tokens, keys)."""
    return bool(_SECRET.search(key))


def mask(key: str, value: Any) -> Any:
    return "****" if is_secret(key) and value not in (None, "") else value


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _property_value(key: str, value: Any, where: str) -> str:
    """librdkafka takes strings; TOML booleans and numbers become its spelling."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise ConfigError(f"{where}: kafka property {key!r} must be a string, number or boolean")


def _subcommands(cmd: Any) -> dict[str, Any]:
    """A click group's commands ({} for a command); typer's click is duck-typed here."""
    commands = getattr(cmd, "commands", None)
    return dict(commands) if isinstance(commands, dict) else {}


def _option_names(cmd: Any) -> dict[str, str]:
    """Every spelling a file may use for a command's options → the parameter's name."""
    names: dict[str, str] = {}
    for p in cmd.params:
        if p.name is None or getattr(p, "param_type_name", "") != "option":
            continue
        for flag in p.opts:  # --max-body → max-body (and --from → from, named start)
            if flag.startswith("--"):
                names[flag[2:]] = p.name
        names.setdefault(p.name, p.name)
        names.setdefault(p.name.replace("_", "-"), p.name)
    return names


def _flags(cmd: Any) -> list[str]:
    return sorted(
        f[2:]
        for p in cmd.params
        if p.name and getattr(p, "param_type_name", "") == "option"
        for f in p.opts
        if f.startswith("--") and f != "--help"
    )


def _command_table(cmd: Any, table: Mapping[str, Any], where: str, path: str) -> dict[str, Any]:
    """Check a ``[command]`` table against the command's options (unknown keys are errors)."""
    out: dict[str, Any] = {}
    groups = _subcommands(cmd)
    options = _option_names(cmd)
    for key, value in table.items():
        if isinstance(value, dict) and key in groups:
            out[key] = _command_table(groups[key], value, where, f"{path}.{key}")
        elif key in options:
            out[options[key]] = value
        else:
            known = sorted(set(_flags(cmd)) | set(groups))
            raise ConfigError(
                f"{where}: [{path}] has no option {key!r}"
                + (f" (it has: {', '.join(known)})" if known else "")
            )
    return out


def global_options(root: Any) -> dict[str, Any]:
    """The root command's options a file may set (every global flag): name → parameter."""
    return {
        p.name: p
        for p in root.params
        if p.name and p.name not in NOT_IN_FILE and getattr(p, "param_type_name", "") == "option"
    }


def load_file(path: Path, root: Any) -> ConfigFile:
    """Parse and check a TOML config file against the CLI's commands and options."""
    where = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"config file {path} is over {MAX_FILE_BYTES} bytes")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    cfg = ConfigFile(path=path)
    globals_ = global_options(root)
    for key, value in doc.items():
        if key.replace("-", "_") in globals_:
            if not isinstance(value, str | int | float | bool):
                raise ConfigError(f"{where}: {key} must be a string, number or boolean")
            cfg.globals[key.replace("-", "_")] = value
        elif key == "kafka":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: kafka must be a table of librdkafka properties")
            group = _subcommands(_subcommands(root)["kafka"])
            for k, v in value.items():
                if k in KAFKA_GROUP_COMMANDS and isinstance(v, dict):
                    sub = _command_table(group[k], v, where, f"kafka.{k}")
                    cfg.commands.setdefault("kafka", {})[k] = sub
                else:
                    flat = _flatten({k: v}) if isinstance(v, dict) else {k: v}
                    for name, val in flat.items():
                        cfg.kafka[name] = _property_value(name, val, where)
        elif key in _subcommands(root) and isinstance(value, dict):
            cfg.commands[key] = _command_table(_subcommands(root)[key], value, where, key)
        else:
            raise ConfigError(
                f"{where}: unknown key {key!r} (top-level keys: {', '.join(globals_)}, "
                "[kafka] for client properties, or a table named after a command)"
            )
    return cfg


def kafka_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Setting]:
    """``CLAIMGRAPH_KAFKA_SASL_PASSWORD=x`` → ``sasl.password``; ``__`` spells ``_``."""
    env = os.environ if environ is None else environ
    out: dict[str, Setting] = {}
    for name in sorted(env):
        if not name.startswith(ENV_KAFKA) or len(name) == len(ENV_KAFKA):
            continue
        key = name[len(ENV_KAFKA) :].lower().replace("__", "\0").replace("_", ".")
        out[key.replace("\0", "_")] = Setting(env[name], f"env {name}")
    return out


def kafka_from_flags(values: list[str] | tuple[str, ...]) -> dict[str, Setting]:
    """``-X key=value`` options (repeatable)."""
    out: dict[str, Setting] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-X {item!r}: expected a librdkafka property as KEY=VALUE")
        out[key.strip()] = Setting(value, "flag -X")
    return out
