"""The ``claimgraph`` command line: a thin shell over the service layer.

Each command group lives in its own module and registers itself on the one app
(:mod:`claimgraph.cli.common`). Errors exit non-zero with one clear line (exit codes come
from the error classes in :mod:`claimgraph.errors`); ``--json`` makes every read print JSON.
"""

from __future__ import annotations

import os
import sys

from claimgraph.cli.common import app, err
from claimgraph.errors import ClaimgraphError, ConfigError, SchemaError

# The command groups register on the one app as they are imported, in this order (--help's).
# isort: split
from claimgraph.cli import writes as writes

from claimgraph.cli import whatif as whatif  # isort: skip  (schema what-if: after show)
from claimgraph.cli import reads as reads  # isort: skip
from claimgraph.cli import queries as queries  # isort: skip  (the printers of paths, reach)
from claimgraph.cli import agents, export, governance, kafka, rules, serving  # isort: skip
from claimgraph.cli import versions  # isort: skip
from claimgraph.cli import catalogue  # isort: skip
from claimgraph.cli import tokens  # isort: skip
from claimgraph.cli import config_show  # isort: skip

__all__ = ["app", "main"]

kafka.register(app)
governance.register(app)
rules.register(app)
versions.register(app)
serving.register(app)  # serve, runs, key
agents.register(app)  # mcp, tools
catalogue.add_reads(app)  # get, slot, neighbors, paths, reach, history, quarantine, claim, log
export.register(app)  # export
tokens.register(app)  # token
config_show.register(app)  # config show


# optional dependencies → the extra that installs them (pyproject.toml)
_EXTRAS = {
    "uvicorn": "http",
    "fastapi": "http",
    "starlette": "http",
    "confluent_kafka": "kafka",
    "mcp": "mcp",
    "networkx": "export",
    "pyarrow": "export",
}


def main() -> None:
    """Entry point: run the CLI, turning our errors into one line and an exit code."""
    try:
        app()
    except SchemaError as exc:
        err.print(f"claimgraph: error: {exc}", markup=False)
        if len(exc.problems) > 1:
            err.print(exc.report(), markup=False)
        sys.exit(exc.exit_code)
    except ClaimgraphError as exc:
        err.print(f"claimgraph: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("claimgraph: interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        extra = _EXTRAS.get((getattr(exc, "name", None) or "").split(".")[0])
        if isinstance(exc, ModuleNotFoundError) and extra is not None:
            # an optional extra is not installed: a setup error, not a bug
            err.print(
                f"claimgraph: error: this command needs the {extra!r} extra (no module "
                f"{exc.name!r}): pip install 'claimgraph[{extra}]'",
                markup=False,
            )
            sys.exit(ConfigError.exit_code)
        if os.environ.get("CLAIMGRAPH_DEBUG"):
            raise
        err.print(
            f"claimgraph: internal error: {type(exc).__name__}: {exc} "
            "(set CLAIMGRAPH_DEBUG=1 for the traceback)",
            markup=False,
        )
        sys.exit(70)
