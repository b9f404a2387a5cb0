"""What a kept line and a mark count against a run's bound: the memory they hold."""

from __future__ import annotations

# What the bound counts is memory held. A line: its text (a byte a character when it is ASCII),
# its str object's header (49 bytes) and its list slot (8). A non-ASCII line: up to eight bytes
# a character, four for its text (CPython's widest) and up to four for the UTF-8 copy that
# orjson caches inside the str once a client has been sent the line.
LINE_BYTES = 57
WIDE_CHAR_BYTES = 8
WIDE_LINE_BYTES = 28  # what a non-ASCII str's header holds more, and its UTF-8 copy's NUL
# A mark: its three list slots, its int and its float.
MARK_BYTES = 3 * 8 + 28 + 24


def line_bytes(line: str) -> int:
    """What one line counts against a bound (without its mark)."""
    count = len(line)
    return (count if line.isascii() else WIDE_CHAR_BYTES * count + WIDE_LINE_BYTES) + LINE_BYTES
