"""``python -m claimgraph``: the command line."""

from claimgraph.cli.main import main

main()
