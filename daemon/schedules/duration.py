"""Go-style durations (``90s``, ``1h30m``, ``250ms``): the text form of every duration runbroker
reads or prints.

Values are seconds as ``float``, limited to Go's range (about 292 years).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "ASCII_SPACE",
    "MAX_DURATION_S",
    "DurationError",
    "format_duration",
    "parse_duration",
]

_NS_PER_S = 10**9
_MAX_DURATION_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds
MAX_DURATION_S = _MAX_DURATION_NS / _NS_PER_S
ASCII_SPACE = " \t\r\n\f\v"  # the only white space a duration or schedule may hold
_MICRO_SIGN = "\u00b5"  # what Go prints (Go also accepts the Greek mu, U+03BC)
_UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 10**3,
    _MICRO_SIGN + "s": 10**3,
    "\u03bcs": 10**3,
    "ms": 10**6,
    "s": _NS_PER_S,
    "m": 60 * _NS_PER_S,
    "h": 3600 * _NS_PER_S,
}
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_MAX_WHOLE_DIGITS = 20  # more integer digits than this overflows in every unit
_MAX_FRACTION_DIGITS = 30  # digits beyond this cannot change a nanosecond value


class DurationError(ValueError):
    """A text that is not a valid duration.

    ``str(err)`` names the text and ``err.reason`` never contains any of it, so a caller that
    must not reveal the value can report ``err.reason`` alone."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid duration {text!r}: {reason}")
        self.text = text
        self.reason = reason


def parse_duration(text: str) -> float:
    """Parse a Go-style duration such as ``90s`` or ``-1h30m`` into seconds.

    Surrounding ASCII whitespace is ignored. Raises :class:`DurationError` (a
    ``ValueError``) for anything else: empty text, a missing or unknown unit,
    non-ASCII digits or letters, or a value outside Go's range.
    """
    if not isinstance(text, str):
        raise TypeError(f"duration must be a str, not {type(text).__name__}")
    body = text.strip(ASCII_SPACE)
    if not body:
        raise DurationError(text, "empty")
    negative = body[0] == "-"
    if body[0] in "+-":
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(text, "a sign needs a number and a unit after it")
    total_ns = Fraction(0)
    pos = 0
    while pos < len(body):
        number = _NUMBER.match(body, pos)
        assert number is not None  # the pattern also matches the empty string
        whole, fraction = number.group(1), number.group(2)
        if not whole and not fraction:
            raise DurationError(text, "expected an ASCII number")
        unit_end = number.end()
        while (
            unit_end < len(body) and body[unit_end] != "." and not _is_ascii_digit(body[unit_end])
        ):
            unit_end += 1
        unit = body[number.end() : unit_end]
        if not unit:
            raise DurationError(text, "missing unit (ns, us, ms, s, m or h)")
        unit_ns = _UNIT_NS.get(unit)
        if unit_ns is None:
            raise DurationError(text, "unknown unit (expected ns, us, ms, s, m or h)")
        total_ns += _decimal(text, whole, fraction or "") * unit_ns
        if total_ns > _MAX_DURATION_NS:
            raise DurationError(text, "out of range (at most about 292 years)")
        pos = unit_end
    if total_ns == 0:
        return 0.0
    seconds = float(total_ns / _NS_PER_S)
    return -seconds if negative else seconds


def format_duration(seconds: float) -> str:
    """Format seconds the way Go prints durations, dropping zero parts.

    Examples: ``5400`` → ``1h30m``, ``0.25`` → ``250ms``, ``0`` → ``0s``,
    ``3600.5`` → ``1h0.5s``. The value is rounded to whole nanoseconds (Go's
    resolution), so ``parse_duration(format_duration(x))`` gives back ``x`` for any
    whole number of nanoseconds, and is within half a nanosecond otherwise.
    """
    if not math.isfinite(seconds):
        raise ValueError(f"cannot format a non-finite duration: {seconds!r}")
    if abs(seconds) > MAX_DURATION_S:
        raise ValueError(f"duration out of range (at most about 292 years): {seconds!r}")
    # MAX_DURATION_S is the Go limit rounded to a float, a little above it: clamp.
    total_ns = max(-_MAX_DURATION_NS, min(_MAX_DURATION_NS, round(Fraction(seconds) * _NS_PER_S)))
    if total_ns == 0:
        return "0s"
    sign = "-" if total_ns < 0 else ""
    ns = abs(total_ns)
    if ns < 10**3:
        return f"{sign}{ns}ns"
    if ns < 10**6:
        return f"{sign}{_decimal_text(ns, 10**3)}{_MICRO_SIGN}s"
    if ns < _NS_PER_S:
        return f"{sign}{_decimal_text(ns, 10**6)}ms"
    hours, rest_ns = divmod(ns, 3600 * _NS_PER_S)
    minutes, rest_ns = divmod(rest_ns, 60 * _NS_PER_S)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    if rest_ns:
        parts.append(f"{_decimal_text(rest_ns, _NS_PER_S)}s")
    return sign + "".join(parts)


def _decimal(text: str, whole: str, fraction: str) -> Fraction:
    """The exact value of ASCII digits ``whole.fraction``, refusing absurd lengths."""
    whole = whole.lstrip("0")
    if len(whole) > _MAX_WHOLE_DIGITS:
        raise DurationError(text, "out of range (at most about 292 years)")
    fraction = fraction[:_MAX_FRACTION_DIGITS]
    value = Fraction(int(whole or "0"))
    if fraction:
        value += Fraction(int(fraction), 10 ** len(fraction))
    return value


def _decimal_text(value: int, scale: int) -> str:
    """``value / scale`` in decimal without trailing zeros (scale is a power of ten)."""
    whole, fraction = divmod(value, scale)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def _is_ascii_digit(char: str) -> bool:
    return "0" <= char <= "9"
