"""Structured logs of the long-running processes: one JSON object per line on stderr."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

__all__ = ["log_event"]


def log_event(event: str, **fields: Any) -> None:
    """One structured line on stderr (never tokens or keys)."""
    line = {"ts": round(time.time(), 3), "event": event, **fields}
    print(json.dumps(line, default=str), file=sys.stderr, flush=True)
