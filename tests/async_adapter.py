"""Drive the async SDK from sync tests: one contract suite for sync and async graphs.

:class:`Blocking` wraps an async graph (or run): each coroutine method is run to completion
on an event loop in a thread of its own, so the graph port's contract suite calls the async
SDK exactly as it calls the sync one.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from claimgraph.sdk.aio_runs import AsyncRun

T = TypeVar("T")


class Loop:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Blocking:
    """An async object's interface, blocking: coroutine methods are awaited on ``loop``."""

    def __init__(self, target: Any, loop: Loop) -> None:
        self._target = target
        self._loop = loop

    def _wrap(self, value: Any) -> Any:
        return Blocking(value, self._loop) if isinstance(value, AsyncRun) else value

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **kw: self._wrap(self._loop.run(attr(*a, **kw)))
        if callable(attr) and not isinstance(attr, type):
            return lambda *a, **kw: self._wrap(attr(*a, **kw))
        return attr

    def __enter__(self) -> Blocking:
        self._loop.run(self._target.__aenter__())
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.run(self._target.__aexit__(*exc))
