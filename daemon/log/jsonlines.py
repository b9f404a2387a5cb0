"""Text lines as JSON lines at C speed: each line a JSON string between a head and a tail.

One ``orjson.dumps`` per line costs about as much as a chatty job spends writing it, so the
whole list is encoded at once and cut into its strings, which is safe when no line holds a
quote: every quote is then a string's own, so each ``","`` between the first and the last
is a boundary. Lines with quotes take the standard library's C escaper.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii

_dumps = None


def json_lines(head: bytes, lines: list[str], tail: bytes) -> bytes:
    """``head + JSON string + tail`` for each of ``lines``, joined."""
    global _dumps
    if not lines:
        return b""
    if _dumps is None:
        import orjson  # loaded by the first run that prints: not in an idle daemon

        _dumps = orjson.dumps
    try:
        listed: bytes = _dumps(lines)
    except TypeError:  # what orjson refuses (a lone surrogate)
        listed = b""
    if listed and listed.count(b'"') == 2 * len(lines):
        # Cut inside the outer quotes: a first line that is just "," would read as a separator.
        inner = listed[2:-2].replace(b'","', b'"' + tail + head + b'"')
        return head + b'"' + inner + b'"' + tail
    between = (tail + head).decode()
    text = head.decode() + between.join(map(encode_basestring_ascii, lines)) + tail.decode()
    return text.encode()
