"""What a run's record may hold, made storable: PostgreSQL's ``jsonb`` and ``text`` refuse what
Python's strings and json allow.

A NUL, a lone surrogate or a non-finite number in a handler's output would fail the statement
that writes it, and with it every other record of its batch.
"""

from __future__ import annotations

import json
import math
from typing import Any

REPLACEMENT = "\ufffd"


def text_safe(text: str) -> str:
    """``text`` without NUL or lone surrogates (each becomes U+FFFD)."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogates: pairs join, lone ones are replaced
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def jsonb_safe(value: Any) -> Any:
    """``value`` (a decoded JSON value) as ``jsonb`` stores it.

    ``TypeError`` when it holds something that is not JSON at all (a set, an object). Costs one
    ``json.dumps`` in the usual case, when there is nothing to clean."""
    try:
        encoded = json.dumps(value, allow_nan=False)
    except ValueError:  # NaN or an infinity
        return _cleaned(value, depth=0)
    except RecursionError:
        raise TypeError("nested too deeply") from None
    if "\\u0000" in encoded or "\\ud" in encoded:  # NUL, or a surrogate (maybe a pair)
        return _cleaned(value, depth=0)
    return value


MAX_DEPTH = 400  # levels cleaned: deeper is refused as not JSON (well within the recursion limit)


def _cleaned(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TypeError("nested too deeply")
    if isinstance(value, str):
        return text_safe(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            (text_safe(k) if isinstance(k, str) else k): _cleaned(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_cleaned(item, depth + 1) for item in value]
    if value is None or isinstance(value, bool | int):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON")
