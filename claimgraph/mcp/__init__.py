"""The MCP server: agents read and write the graph as tools, inside a run, as who they are.

:mod:`~claimgraph.mcp.session` holds one session's identity, run and tool implementations;
:mod:`~claimgraph.mcp.server` declares the tools and resources for a model (the official
``mcp`` SDK); :mod:`~claimgraph.mcp.transports` serves them over stdio (``claimgraph mcp``) or
mounts the streamable HTTP transport at ``/mcp`` (``claimgraph serve``);
:mod:`~claimgraph.mcp.toolspec` prints the same tools for other hosts (``claimgraph tools``).
"""
