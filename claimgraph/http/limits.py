"""The limits, as the HTTP API imported them before the service layer owned them.

They are :mod:`claimgraph.service.limits`' now: every surface meets them there.
"""

from __future__ import annotations

from claimgraph.service.limits import HTTP_LIMITS, HttpLimits, Limits, RunTally, Slots

__all__ = ["HTTP_LIMITS", "HttpLimits", "Limits", "RunTally", "Slots"]
