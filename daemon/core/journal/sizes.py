"""What a kept line and a mark count against a run's bound: the memory they hold."""

from __future__ import annotations

# A line counts its text, its str header and its list slot. A non-ASCII character counts eight
# bytes at most: four in CPython's widest str and four in the UTF-8 copy orjson caches in it.
LINE_BYTES = 57
WIDE_CHAR_BYTES = 8
WIDE_LINE_BYTES = 28  # what a non-ASCII str's header holds more, and its UTF-8 copy's NUL
# A mark: its three list slots, its int and its float.
MARK_BYTES = 3 * 8 + 28 + 24


def line_bytes(line: str) -> int:
    """What one line counts against a bound (without its mark)."""
    count = len(line)
    return (count if line.isascii() else WIDE_CHAR_BYTES * count + WIDE_LINE_BYTES) + LINE_BYTES
