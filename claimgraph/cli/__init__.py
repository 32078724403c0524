"""The ``claimgraph`` command line: one module per command group, thin over the service layer."""

from claimgraph.cli.main import app, main

__all__ = ["app", "main"]
