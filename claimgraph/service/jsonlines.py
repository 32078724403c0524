"""JSON Lines in: one record per line, whatever the line holds (``claimgraph submit``).

:func:`read_lines` never holds more than ``max_line`` + 1 bytes of a line; :func:`line_record`
turns each line into its command, or into an ``invalid_input`` record carrying the error and
at most ``LIMITS["raw"]`` bytes of the line — it never raises for what a line holds, so every
line gets exactly one decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any, cast

from claimgraph.core.model import LIMITS, Command
from claimgraph.core.wire import encode_command
from claimgraph.errors import ClaimgraphError, InputError
from claimgraph.service.bounded import INPUT_LIMITS, InputLimits, loads, text
from claimgraph.service.inputs import fast_record, parse_command_spec

__all__ = ["BOM", "line_record", "read_lines"]

BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark


def read_lines(stream: IO[bytes], max_line: int) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line without its newline, the line's full length) for each line.

    Never holds more than ``max_line`` + 1 bytes of a line: the rest of a longer line is read
    in chunks and dropped (its full length is still counted, for the error). A UTF-8 byte
    order mark at the very start of the input is dropped (editors write one); anywhere else
    :func:`line_record` names it.
    """
    lineno = 0
    while True:
        raw = stream.readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if lineno == 1 and raw.startswith(BOM):  # a byte order mark may begin the input
            raw = raw[len(BOM) :]
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            size = len(raw)
        else:
            size = len(raw)
            while size > max_line:  # a longer line: drop the rest of it
                more = stream.readline(64 * 1024)
                if not more:
                    break
                if more.endswith(b"\n"):
                    size += len(more) - 1
                    break
                size += len(more)
        yield lineno, raw, size


def _id_of(obj: Any) -> str:
    """The line's command id, if it is one a record can carry (else the record has none)."""
    cid = obj.get("command_id") if isinstance(obj, dict) else None
    if not isinstance(cid, str) or not 0 < len(cid) <= LIMITS["id"]:
        return ""
    return cid if text(cid) == cid else ""


def line_record(
    raw: bytes,
    lineno: int,
    graph: str,
    agent: str | None = None,
    limits: InputLimits = INPUT_LIMITS,
    *,
    size: int | None = None,
) -> bytes:
    """The record for one JSON Lines line: its command, or an ``invalid_input`` record.

    Never raises for what the line holds: a line too long (``size`` is its full length when
    :func:`read_lines` cut it), too deep, not JSON, not a command, or a command the wire
    cannot carry becomes an ``invalid_input`` record with a clear error (the governor
    rejects it as ``malformed``), so every line gets exactly one decision.
    """
    obj: Any = None
    size = len(raw) if size is None else size
    try:
        if size > limits.max_line:
            raise InputError(f"the line has {size} bytes; at most {limits.max_line}")
        if raw.startswith(BOM):
            raise InputError(
                "the line starts with a UTF-8 byte order mark (EF BB BF): one may begin the "
                "input only, not a line after the first"
            )
        obj = loads(raw, limits)
        if isinstance(obj, dict) and agent and "agent" not in obj:
            obj["agent"] = agent
        record = fast_record(obj, graph)  # a plain claim; else the spec below decides
        if record is not None:
            return record
        try:
            return encode_command(parse_command_spec(obj, graph))
        except (TypeError, ValueError, OverflowError) as exc:  # what the wire cannot carry
            raise InputError(f"cannot encode the command: {exc}") from None
    except ClaimgraphError as exc:
        error = str(exc)
    return encode_command(
        cast(
            Command,
            {
                "type": "invalid_input",
                "command_id": _id_of(obj),
                "graph": graph,
                "agent": text(agent or "", LIMITS["id"]),
                "task": "",
                "raw": raw[: LIMITS["raw"]],
                "error": text(f"line {lineno}: {error}"),
            },
        )
    )
