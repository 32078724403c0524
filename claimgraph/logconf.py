"""The one log format: stdlib :mod:`logging` for every process, one JSON object per line.

Every component logs through a logger of its own, ``claimgraph.COMPONENT`` (the names are
declared once, in :data:`COMPONENTS`), and says *events*: a dotted name and fields, never a
sentence to parse::

    _log = events("governor")
    _log.warning("governor.retry", partition=0, error=str(exc))

:func:`configure` (called once by the CLI from ``--log-level``, ``--log-format`` and
``--log-interval``) gives the root logger one handler on stderr, so the records of uvicorn,
the MCP SDK and librdkafka (:class:`KafkaClientLog`, the ``logger`` of every Kafka client)
come out in the same format as ours:

* ``json`` — one object per line: ``{"ts": 1764590000.123, "level": "info", "logger":
  "claimgraph.http", "event": "http.request", ...fields}``; a record that is not an event
  has ``"event": "log"`` and its text in ``message``; an exception adds ``exc_type`` and the
  traceback as one string, ``exc``;
* ``console`` — one readable line per record (and a traceback under it): the default when
  stderr is a terminal.

A warning (or a Kafka client's line) that repeats is not printed again while it keeps
repeating: the first occurrence is, then the repeats are counted and reported once per
interval in a ``log.repeated`` line (:class:`Repeats`) — a broker outage is a few lines,
not one per reconnect attempt.

Without :func:`configure` (claimgraph used as a library) nothing is installed: the
application's logging decides, and an event's plain text is ``event key=value ...``.
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Literal, TextIO

from claimgraph.errors import ConfigError

__all__ = [
    "COMPONENTS",
    "DEFAULT_INTERVAL",
    "QUIET",
    "ConsoleFormatter",
    "Event",
    "EventLog",
    "JsonFormatter",
    "KafkaClientLog",
    "Repeats",
    "configure",
    "events",
    "json_handler",
    "kafka_client_log",
    "logger_name",
    "parse_levels",
]

# claimgraph.COMPONENT: every logger of the package (docs/logging.md lists what each says)
COMPONENTS = (
    "http",  # one event per request (http.request)
    "governor",  # the Kafka governor (governor.*)
    "projector",  # the Kafka projector (projector.*)
    "storage",  # embedded graphs: projection upgrades, recoveries, checkpoints skipped
    "writer",  # the local socket that serves other processes' writes (writer.*)
    "access",  # the service layer beneath the transports: runs it ended, reports it missed
    "resolvers",  # serve's resolver worker (resolvers.*)
    "ticker",  # serve's deadline ticker (ticker.*)
    "serve",  # serve itself: its duties, how it stopped
    "metrics",  # the consumer-lag timer of the governor and projector (lag.*)
    "kafka",  # librdkafka: every Kafka client's own lines (kafka.client)
    "log",  # this module: repeats counted (log.repeated), uncaught thread errors
)
FORMATS = ("auto", "json", "console")
DEFAULT_INTERVAL = 10.0  # seconds between two reports of one repeating line
QUIET = 3  # intervals a repeating line must be silent for its next occurrence to be printed
# levels of the loggers a --log-level spec does not name
DEFAULT_LEVELS = {"claimgraph": logging.INFO, "uvicorn": logging.WARNING, "mcp": logging.WARNING}
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_NAMES = {v: k for k, v in _LEVELS.items()}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class Event:
    """What one record says: an event name and its fields (the record's ``msg``).

    ``key`` is what makes two records "the same" for :class:`Repeats` (default: the name and
    every field); ``tail`` may hold the fields already encoded as the JSON formatter would
    (``, "k": v}``), for a hot path that renders them from a template.
    """

    __slots__ = ("fields", "key", "name", "tail")

    def __init__(
        self,
        name: str,
        fields: Mapping[str, Any],
        key: tuple[Any, ...] | None = None,
        tail: str | None = None,
    ) -> None:
        self.name = name
        self.fields = fields
        self.key = key
        self.tail = tail

    def __str__(self) -> str:
        return " ".join([self.name, *(f"{k}={_plain(v)}" for k, v in self.fields.items())])


def _plain(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return json.dumps(text) if not text or any(c.isspace() for c in text) else text


class EventLog:
    """The events of one component: ``log.info("name", **fields)``, ``warning``, ..."""

    __slots__ = ("logger",)

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def log(self, level: int, event: str, /, exc_info: bool = False, **fields: Any) -> None:
        if self.logger.isEnabledFor(level):
            self.logger.log(level, Event(event, fields), exc_info=exc_info, stacklevel=3)

    def debug(self, event: str, /, **fields: Any) -> None:
        self.log(logging.DEBUG, event, **fields)

    def info(self, event: str, /, **fields: Any) -> None:
        self.log(logging.INFO, event, **fields)

    def warning(self, event: str, /, **fields: Any) -> None:
        self.log(logging.WARNING, event, **fields)

    def error(self, event: str, /, exc_info: bool = False, **fields: Any) -> None:
        self.log(logging.ERROR, event, exc_info=exc_info, **fields)


def events(component: str) -> EventLog:
    """The event log of ``claimgraph.COMPONENT`` (one of :data:`COMPONENTS`)."""
    if component not in COMPONENTS:
        raise ValueError(f"{component!r} is not one of claimgraph.logconf.COMPONENTS")
    return EventLog(logging.getLogger(f"claimgraph.{component}"))


# -- formats -----------------------------------------------------------------------------------


def _exception(record: logging.LogRecord) -> dict[str, str]:
    if not record.exc_info or record.exc_info[0] is None:
        return {}
    etype, exc, tb = record.exc_info
    text = "".join(traceback.format_exception(etype, exc, tb)).rstrip("\n")
    return {"exc_type": etype.__name__, "exc": text}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (``json.dumps``: ASCII, so no raw newline or
    line separator can split it)."""

    def __init__(self) -> None:
        super().__init__()
        self._quoted: dict[str, str] = {}

    def _q(self, text: str) -> str:
        q = self._quoted.get(text)
        if q is None:
            q = json.dumps(text)
            if len(self._quoted) < 4096:  # logger and event names: a bounded set
                self._quoted[text] = q
        return q

    def head(self, created: float, level: str, logger: str, event: str) -> str:
        """The line's start: ``{"ts": ..., "level": ..., "logger": ..., "event": ...``."""
        return (
            f'{{"ts": {round(created, 3)!r}, "level": "{level}", '
            f'"logger": {self._q(logger)}, "event": {self._q(event)}'
        )

    def format(self, record: logging.LogRecord) -> str:
        msg = record.msg
        level = _NAMES.get(record.levelno) or record.levelname.lower()
        if isinstance(msg, Event):
            head = self.head(record.created, level, record.name, msg.name)
            exc = _exception(record)
            if msg.tail is not None and not exc:
                return head + msg.tail
            fields: Mapping[str, Any] = {**msg.fields, **exc} if exc else msg.fields
        else:
            head = (
                f'{{"ts": {round(record.created, 3)!r}, "level": "{level}", '
                f'"logger": {self._q(record.name)}, "event": "log"'
            )
            fields = {"message": record.getMessage(), **_exception(record)}
        if not fields:
            return head + "}"
        return head + ", " + json.dumps(fields, default=str)[1:]


class ConsoleFormatter(logging.Formatter):
    """``12:00:01.234 WARNING governor governor.retry partition=0 error=...`` (a traceback
    on the lines below): for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.strftime("%H:%M:%S", time.localtime(record.created))
        ms = int(record.msecs)
        name = record.name.removeprefix("claimgraph.")
        line = f"{t}.{ms:03d} {record.levelname:<7} {name} {record.getMessage()}"
        exc = _exception(record)
        return line + ("\n" + exc["exc"] if exc else "")


# -- repeats -------------------------------------------------------------------------------------


class _Seen:
    __slots__ = ("count", "last", "level", "logger", "what")

    def __init__(self, logger: str, what: str, level: int, now: float) -> None:
        self.logger = logger
        self.what = what
        self.level = level
        self.last = now
        self.count = 0  # repeats not printed since the last report


class Repeats(logging.Filter):
    """Print a repeating line once per state change, and count its repeats.

    A record at WARNING or above, or any line of a Kafka client (``claimgraph.kafka``), is
    printed the first time it is seen; the same record again (same logger, level and key:
    an event's name and fields, a Kafka client's facility and message) is counted instead,
    as long as it keeps coming back within ``QUIET`` intervals of the last time. Once per
    ``interval`` seconds, each logger with counted repeats gets one ``log.repeated`` line
    (at the highest level counted) listing them. A line that was quiet for ``QUIET``
    intervals is printed again when it comes back: that is a new state (a reconnect loop
    whose backoff has grown to the interval still counts as one). Repeats still counted at
    exit are reported then.
    """

    MAX_KEYS = 1024  # distinct lines remembered (beyond it the oldest are forgotten)
    SHOWN = 10  # lines listed by name in one report (the rest summed as "others")

    def __init__(
        self, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval = interval
        self.quiet = QUIET * interval  # silent this long: its next occurrence is a new state
        self.clock = clock
        self._seen: dict[tuple[Any, ...], _Seen] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.reported = 0  # log.repeated lines written (for tests)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interval <= 0 or (
            record.levelno < logging.WARNING and record.name != "claimgraph.kafka"
        ):
            return True
        msg = record.msg
        if isinstance(msg, Event):
            if msg.name == "log.repeated":
                return True
            key: tuple[Any, ...] = msg.key or (msg.name, json.dumps(msg.fields, default=str))
            what = " ".join(str(k) for k in msg.key) if msg.key else str(msg)
        else:
            what = record.getMessage()
            key = (what,)
        key = (record.name, record.levelno, *key)
        if record.exc_info and record.exc_info[1] is not None:  # another error: another line
            key = (*key, type(record.exc_info[1]).__name__, str(record.exc_info[1])[:200])
        now = self.clock()
        with self._lock:
            s = self._seen.get(key)
            if s is not None and now - s.last <= self.quiet:
                s.last = now
                s.count += 1
                self._arm()
                return False
            if s is None:  # new; one that was quiet for a while is a new state too
                if len(self._seen) >= self.MAX_KEYS:
                    self._forget(now)
                self._seen[key] = _Seen(record.name, what[:300], record.levelno, now)
            else:
                s.last = now
            return True

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.interval, self.report)
            self._timer.name = "claimgraph-log-repeats"
            self._timer.daemon = True
            self._timer.start()

    def _forget(self, now: float) -> None:
        for k in [k for k, s in self._seen.items() if now - s.last > self.quiet]:
            del self._seen[k]
        if len(self._seen) >= self.MAX_KEYS:
            self._seen.clear()

    def report(self) -> None:
        """Write the counted repeats, one ``log.repeated`` line per logger (also at exit)."""
        with self._lock:
            self._timer = None
            counted = [s for s in self._seen.values() if s.count]
            by_logger: dict[str, list[_Seen]] = {}
            for s in counted:
                by_logger.setdefault(s.logger, []).append(s)
            lines = []
            for name, seen in by_logger.items():
                seen.sort(key=lambda s: -s.count)
                listed = [{"what": s.what, "count": s.count} for s in seen[: self.SHOWN]]
                fields: dict[str, Any] = {
                    "count": sum(s.count for s in seen),
                    "interval_s": self.interval,
                    "repeats": listed,
                }
                if len(seen) > self.SHOWN:
                    fields["others"] = sum(s.count for s in seen[self.SHOWN :])
                lines.append((name, max(s.level for s in seen), fields))
            for s in counted:
                s.count = 0
            self.reported += len(lines)
        for name, level, fields in lines:
            logger = logging.getLogger(name)
            record = logger.makeRecord(name, level, "", 0, Event("log.repeated", fields), (), None)
            logger.handle(record)


# -- librdkafka --------------------------------------------------------------------------------

_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")
_AFTER = re.compile(
    r"\s*\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)"
)


class KafkaClientLog:
    """The ``logger`` of every Kafka client: librdkafka's lines as ``kafka.client`` events of
    ``claimgraph.kafka`` (facility, client, message), instead of raw ``%3|...|FAIL|...``
    lines on stderr.

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client, text)`` with a
    logging level, and only from a client's ``poll()`` (``flush()``, ``consume()``): with a
    logger set it queues librdkafka's lines instead of printing them from its threads. A
    client that is never polled (a short-lived admin client) drops them when destroyed; its
    failures reach us as exceptions anyway. For :class:`Repeats`, two lines are the same when
    their facility and text agree, whatever client said them and however long the attempt
    took (``(after 0ms in state CONNECT)``).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("claimgraph.kafka")

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if not self.logger.isEnabledFor(level):
            return
        if len(args) == 3:
            facility, client, text = (str(a) for a in args)
        else:  # not confluent-kafka's call: keep the text as it is
            facility, client, text = "", "", fmt % args if args else fmt
        text = _THREAD.sub("", text)
        key = (facility, _AFTER.sub("", text))
        fields = {"facility": facility, "client": client, "message": text}
        record = self.logger.makeRecord(
            self.logger.name, level, "", 0, Event("kafka.client", fields, key=key), (), None
        )
        self.logger.handle(record)


_KAFKA_LOG = KafkaClientLog()


def kafka_client_log() -> KafkaClientLog:
    """The one :class:`KafkaClientLog` of the process (what ``KafkaConfig.client()`` sets)."""
    return _KAFKA_LOG


# -- configuration -----------------------------------------------------------------------------


def logger_name(name: str) -> str:
    """A --log-level name as a logger name: a component is ``claimgraph.NAME``; anything else
    (``uvicorn``, ``mcp.server``, ``claimgraph``) is a logger name as it is."""
    return f"claimgraph.{name}" if name in COMPONENTS else name


def parse_levels(spec: str) -> dict[str, int]:
    """``"info,kafka=warning,uvicorn=info"`` → {logger name: level}.

    A bare level is claimgraph's (every component that is not named); ``NAME=LEVEL`` sets
    one logger (:func:`logger_name`). Levels: debug, info, warning, error, critical.
    """
    out = dict(DEFAULT_LEVELS)
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, level = item.rpartition("=")
        name, level = name.strip(), level.strip().lower()
        if level not in _LEVELS:
            raise ConfigError(
                f"--log-level {spec!r}: {level!r} is not a level ({', '.join(_LEVELS)})"
            )
        if not sep:
            out["claimgraph"] = _LEVELS[level]
        elif _NAME.match(name):
            out[logger_name(name)] = _LEVELS[level]
        else:
            raise ConfigError(f"--log-level {spec!r}: {name!r} is not a logger name")
    return out


class _Stderr(logging.StreamHandler[TextIO]):
    """A stream handler on whatever ``sys.stderr`` is when a record is written (a test runner
    may swap it), tagged so :func:`configure` replaces it rather than adding a second."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass

    def write_event(self, logger: str, event: str, tail: str) -> None:
        """Write an INFO event's JSON line as :meth:`emit` would for its record (the caller
        has checked :func:`json_handler`): the head, ``tail`` (the fields, rendered)."""
        formatter = self.formatter
        assert isinstance(formatter, JsonFormatter)
        line = formatter.head(time.time(), "info", logger, event) + tail + self.terminator
        try:
            with self.lock:  # type: ignore[union-attr]
                stream = sys.stderr
                stream.write(line)
                stream.flush()
        except (OSError, ValueError):  # a broken or closed stderr: reported as emit() would
            self.handleError(logging.makeLogRecord({"name": logger, "msg": event}))


def json_handler(logger: logging.Logger) -> _Stderr | None:
    """The handler of :func:`configure`, if it alone would see an INFO record of ``logger``
    and write it as JSON: no filter on the loggers on the way, no other handler, the
    handler's filter :class:`Repeats` (which passes every INFO record outside
    ``claimgraph.kafka``). A hot path may then write its line itself (:meth:`_Stderr.
    write_event`) instead of building a record; anything else (a test's capture handler, a
    filter) gets the record."""
    c: logging.Logger | None = logger
    while c is not None:
        if c.filters:
            return None
        if c.handlers:
            if c.parent is not None or len(c.handlers) != 1:
                return None
            (h,) = c.handlers
            if not isinstance(h, _Stderr) or not isinstance(h.formatter, JsonFormatter):
                return None
            ok = h.level <= logging.INFO and [type(f) for f in h.filters] == [Repeats]
            return h if ok else None
        if not c.propagate:
            return None
        c = c.parent
    return None


def _thread_error(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    logging.getLogger("claimgraph.log").error(
        Event("thread.crashed", {"thread": name}),
        exc_info=(args.exc_type, exc, args.exc_traceback),
    )


_REPEATS: Repeats | None = None
_LEVELS_SET: set[str] = set()  # the loggers configure() gave a level (reset by the next call)


def configure(
    levels: str = "info",
    fmt: Literal["auto", "json", "console"] | str = "auto",
    interval: float = DEFAULT_INTERVAL,
) -> logging.Handler:
    """Install the one stderr handler on the root logger (replacing a previous one) with the
    format, the levels of ``levels`` (:func:`parse_levels`) and :class:`Repeats`; route
    warnings and uncaught thread exceptions into it. Returns the handler."""
    global _REPEATS
    if fmt not in FORMATS:
        raise ConfigError(f"--log-format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if interval < 0:
        raise ConfigError(f"--log-interval {interval}: expected seconds >= 0 (0: no limit)")
    wanted = parse_levels(levels)
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(h)
    if _REPEATS is not None:
        _REPEATS.report()
    handler = _Stderr()
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    _REPEATS = Repeats(interval)
    handler.addFilter(_REPEATS)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in _LEVELS_SET - wanted.keys():
        logging.getLogger(name).setLevel(logging.NOTSET)
    for name, level in wanted.items():
        logging.getLogger(name).setLevel(level)
    _LEVELS_SET.clear()
    _LEVELS_SET.update(wanted)
    # what no formatter of ours reads: not worked out for every record
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.captureWarnings(True)
    threading.excepthook = _thread_error
    return handler


@atexit.register
def _report_at_exit() -> None:
    if _REPEATS is not None:
        _REPEATS.report()
