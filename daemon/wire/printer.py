"""How the thin clients print a run's answer: its output lines a read at a time, and what
they say of lines they lost.

Standard library only, as the thin client that loads it (``client``, ``logs_client``).
"""

from __future__ import annotations

import json

from daemon.wire.protocol import (
    EVENT_DONE,
    EVENT_OUTPUT,
    EVENT_OVERDUE,
    EVENT_QUEUED,
    EVENT_STARTED,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


class Printer:
    """A job's output lines to stdout and stderr as they arrive, a read's lines in one write.

    A write to one stream first flushes the other, so that a terminal shows them in the order
    they came."""

    __slots__ = ("_last", "err", "out")

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self._last: TextIO | None = None

    def to(self, stream: TextIO) -> TextIO:
        last = self._last
        if last is not stream:
            if last is not None:
                last.flush()
            self._last = stream
        return stream

    def output(self, event: dict[str, Any]) -> None:
        """An ``output`` event: a batch's lines (``data``, bytes or a view of them) or one
        ``line``."""
        stream = self.to(self.err if event.get("stream") == "stderr" else self.out)
        data = event.get("data")
        if isinstance(data, bytes | memoryview):
            _write_bytes(stream, data)
        else:
            stream.write(str(event.get("line", "")))
            stream.write("\n")

    def json(self, event: dict[str, Any]) -> None:
        """An answer line as ``--json`` prints it: an ``output`` line for each of a batch's
        lines, as a client that takes no batches is sent them."""
        out = self.to(self.out)
        data = event.get("data")
        if event.get("event") != EVENT_OUTPUT or not isinstance(data, bytes | memoryview):
            out.write(json.dumps(event, ensure_ascii=False) + "\n")
            return
        fields = {key: value for key, value in event.items() if key not in _BATCH_KEYS}
        at = fields.pop("at", None)
        for line in str(data, "utf-8", "replace").split("\n")[:-1]:
            fields["line"] = line
            if at is not None:
                fields["at"] = at  # after ``line``, where the wire has it
            out.write(json.dumps(fields, ensure_ascii=False) + "\n")

    def lifecycle(self, event: dict[str, Any], failure: str) -> None:
        """What ``trigger`` says on stderr of a run's other events.

        ``failure`` is how a ``done`` that is not ok is said."""
        kind, err = event.get("event"), self.to(self.err)
        if kind == EVENT_QUEUED:
            position = event.get("position", "?")
            print(f"runbroker: queued {event.get('id', '')} (position {position})", file=err)
        elif kind == EVENT_STARTED:
            print(f"runbroker: started {event.get('id', '')}", file=err)
        elif kind == EVENT_OVERDUE:
            print(f"runbroker: overdue: {event.get('reason', '')}", file=err)
        elif kind == EVENT_DONE:
            dropped = dropped_text(event)
            if dropped:
                print(f"runbroker: {dropped}", file=err)
            if event.get("ok"):
                duration = event.get("duration_ms")
                print(f"runbroker: done{f' in {duration} ms' if duration else ''}", file=err)
            else:
                print(f"runbroker: {failure}", file=err)

    def flush(self) -> None:
        if self._last is not None:
            self._last.flush()
            self._last = None


_BATCH_KEYS = frozenset({"bytes", "count", "data"})


def _write_bytes(stream: TextIO, data: bytes | memoryview) -> None:
    """``data`` to the bytes beneath ``stream`` (after what its text layer holds), every byte:
    the raw stdout of PYTHONUNBUFFERED may take a write in parts. A stream without bytes
    beneath it (a test's) takes the text."""
    binary = getattr(stream, "buffer", None)
    if binary is None:
        stream.write(str(data, "utf-8", "replace"))
        return
    stream.flush()
    view = memoryview(data)
    while view:
        written = binary.write(view)
        if written is None:  # a descriptor made non-blocking, full: wait until it takes more
            import select

            select.select([], [binary.fileno()], [])
            continue
        view = view[written:]


def dropped_text(event: dict[str, Any]) -> str:
    """What a client says of the output lines it lost (``dropped_lines``), or ""."""
    dropped = event.get("dropped_lines") or 0
    if not dropped:
        return ""
    return f"{dropped} lines dropped: this client read more slowly than the run wrote"
