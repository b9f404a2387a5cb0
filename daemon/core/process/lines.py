"""A command's output, as lines: what its stdout and stderr pipes carry, cut where a line ends
(or where it grows too long)."""

from __future__ import annotations

import codecs
from collections.abc import Callable

LINE_LIMIT_BYTES = 64 * 1024

OutputSink = Callable[[str, str], None]  # (stream, line)
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


class LineSplitter:
    """Bytes of one stream in, lines out: a line longer than ``LINE_LIMIT_BYTES`` arrives in
    pieces, a character cut by a piece's end is carried to the next, ``\\r\\n`` counts as an end
    of line, and what is left at the end of the stream is a last line."""

    __slots__ = ("_buffer", "_cut", "_decoder", "_name", "_sink")

    def __init__(self, name: str, sink: OutputSink) -> None:
        self._name = name
        self._sink = sink
        self._buffer = b""
        self._cut = False  # the last piece was cut at the limit
        self._decoder: codecs.IncrementalDecoder | None = None  # made by the first bytes

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        if self._decoder is None:
            self._decoder = _UTF8_DECODER("replace")
        name, sink, decode = self._name, self._sink, self._decoder.decode
        limit = LINE_LIMIT_BYTES
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            stop = len(buffer) if end < 0 else end
            while stop - start > limit:  # a long line, in pieces of the limit
                sink(name, decode(buffer[start : start + limit]))
                self._cut = True
                start += limit
            if end < 0:
                break
            if self._cut and end == start:
                # The cut fell just before this line's end: no empty piece.
                text = decode(b"", True)
                if text:
                    sink(name, text)
            else:
                text = decode(buffer[start:end], True)
                sink(name, text[:-1] if text.endswith("\r") else text)
            self._cut = False
            start = end + 1
        self._buffer = buffer[start:]

    def close(self) -> None:
        if self._decoder is None:
            return  # the stream said nothing
        text = self._decoder.decode(self._buffer, True)
        self._buffer = b""
        if text:
            self._sink(self._name, text)
