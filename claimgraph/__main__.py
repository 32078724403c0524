"""``python -m claimgraph``: the command line."""

from claimgraph.cli import main

main()
