"""A command's output, as lines: what its stdout and stderr pipes carry, cut where a line ends
(or where it grows too long)."""

from __future__ import annotations

import codecs
from collections.abc import Callable

LINE_LIMIT_BYTES = 64 * 1024

OutputSink = Callable[[str, list[str]], None]  # (stream, the lines of one read, in order)
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


class LineSplitter:
    """Bytes of one stream in, lines out, a list for each read.

    A list a read because a chatty job's pipe gives thousands of lines a read, and a call a line
    downstream would cost more than the job spends writing it. A line longer than
    ``LINE_LIMIT_BYTES`` arrives in pieces, never cutting a character."""

    __slots__ = ("_buffer", "_cut", "_decoder", "_name", "_sink")

    def __init__(self, name: str, sink: OutputSink) -> None:
        self._name = name
        self._sink = sink
        self._buffer = b""
        self._cut = False  # the last piece was cut at the limit
        self._decoder: codecs.IncrementalDecoder | None = None  # made by the first long line

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        end = buffer.rfind(b"\n")
        limit = LINE_LIMIT_BYTES
        if self._cut or len(buffer) - end - 1 > limit:
            lines = self._split_long(buffer)
        elif end < 0:
            self._buffer = buffer
            return
        else:
            # A newline never falls inside a character, nor inside an invalid sequence: the
            # lines decoded together are the lines decoded one by one.
            text = buffer[:end].decode("utf-8", "replace")
            lines = text.split("\n")
            if end > limit // 4 and max(map(len, lines)) > limit // 4:
                # Maybe past the limit in bytes (a character is up to four): count them.
                lines = self._split_long(buffer)
            else:
                self._buffer = buffer[end + 1 :]
                if "\r" in text:
                    lines = [line.removesuffix("\r") for line in lines]
        if lines:
            self._sink(self._name, lines)

    def _split_long(self, buffer: bytes) -> list[str]:
        """The lines of ``buffer`` one by one, a long one in pieces of the limit (what is left
        after the last newline, under the limit, is kept for the next read)."""
        if self._decoder is None:
            self._decoder = _UTF8_DECODER("replace")
        decode = self._decoder.decode
        limit = LINE_LIMIT_BYTES
        lines: list[str] = []
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            stop = len(buffer) if end < 0 else end
            while stop - start > limit:  # a long line, in pieces of the limit
                lines.append(decode(buffer[start : start + limit]))
                self._cut = True
                start += limit
            if end < 0:
                break
            if self._cut and end == start:
                # The cut fell just before this line's end: no empty piece.
                text = decode(b"", True)
                if text:
                    lines.append(text)
            else:
                text = decode(buffer[start:end], True)
                lines.append(text.removesuffix("\r"))
            self._cut = False
            start = end + 1
        self._buffer = buffer[start:]
        return lines

    def close(self) -> None:
        buffer, self._buffer = self._buffer, b""
        if self._cut and self._decoder is not None:
            text = self._decoder.decode(buffer, True)  # with the character the last cut split
            self._cut = False
        else:
            text = buffer.decode("utf-8", "replace")
        if text:
            self._sink(self._name, [text])
