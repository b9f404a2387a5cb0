"""Go-style durations and the interval rules of DESIGN.md ("Interval rules").

Durations follow Go's ``time.ParseDuration``: an optional sign, then one or more
``<number><unit>`` components (``90s``, ``1h30m``, ``250ms``, ``1.5h``), units
``ns us µs ms s m h``; a bare ``0`` is allowed. Only ASCII digits count as digits.
Values are seconds as ``float`` and are limited to Go's range (about 292 years).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

__all__ = [
    "MAX_DURATION_S",
    "DurationError",
    "IntervalDecision",
    "IntervalMode",
    "clamp_interval",
    "format_duration",
    "parse_duration",
    "parse_interval",
]

_NS_PER_S = 10**9
_MAX_DURATION_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds
MAX_DURATION_S = _MAX_DURATION_NS / _NS_PER_S
_ASCII_SPACE = " \t\r\n\f\v"
_MICRO_SIGN = "\u00b5"  # what Go prints; Go also accepts the Greek mu (U+03BC)
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

IntervalMode = Literal["builtin", "external", "once"]


class DurationError(ValueError):
    """A text that is not a valid duration.

    ``str(err)`` names the text; ``err.reason`` never contains any of it, so a
    caller that must not reveal the value can report ``err.reason`` alone.
    """

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
    body = text.strip(_ASCII_SPACE)
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


@dataclass(frozen=True)
class IntervalDecision:
    """What an interval setting means for the ticker.

    ``mode`` is ``builtin`` (tick every ``interval_s`` seconds, always > 0),
    ``external`` (no ticker: runs only when triggered) or ``once`` (run once, no
    ticker); ``interval_s`` is None unless built-in. ``warnings`` are ready to log.
    """

    mode: IntervalMode
    interval_s: float | None
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode == "builtin":
            if self.interval_s is None or not (
                math.isfinite(self.interval_s) and self.interval_s > 0
            ):
                raise ValueError(f"a built-in interval must be positive: {self.interval_s!r}")
        elif self.mode in ("external", "once"):
            if self.interval_s is not None:
                raise ValueError(f"mode {self.mode!r} takes no interval")
        else:
            raise ValueError(f"unknown interval mode {self.mode!r}")


def parse_interval(
    raw: str | None,
    *,
    default_s: float = 3600.0,
    zero_as_once: bool = False,
    min_s: float | None = None,
    max_s: float | None = None,
    redact: bool = False,
) -> IntervalDecision:
    """Apply the DESIGN.md interval rules to a raw setting; never raises for any text.

    - None, empty or ASCII whitespace: built-in at ``default_s``.
    - ``off`` / ``disabled`` (ASCII letters, any case): external.
    - a zero duration (``0``, ``0s``, ``-0m``): external, or ``once`` if ``zero_as_once``.
    - a negative duration or unparseable text: built-in at ``default_s`` + a warning.
    - a positive duration: built-in at that interval.
    A built-in interval is clamped to ``[min_s, max_s]`` (swapped bounds are put in
    order), with a warning when clamping changes it. With ``redact`` no warning
    contains the raw value. ``ValueError`` only for a bad ``default_s``/``min_s``/
    ``max_s`` (each must be a positive, finite number of seconds in Go's range).
    """
    default_s = _check_seconds("default_s", default_s)
    low_s = None if min_s is None else _check_seconds("min_s", min_s)
    high_s = None if max_s is None else _check_seconds("max_s", max_s)
    if low_s is not None and high_s is not None and low_s > high_s:
        low_s, high_s = high_s, low_s
    label = "interval" if redact else f"interval {raw!r}"
    default_label = f"the default interval {format_duration(default_s)}"

    text = "" if raw is None else raw.strip(_ASCII_SPACE)
    if not text:
        return _builtin(default_s, low_s, high_s, default_label, [])
    if text.isascii() and text.lower() in ("off", "disabled"):
        return IntervalDecision("external", None)
    try:
        interval_s = parse_duration(text)
    except DurationError as err:
        warning = f"{label} is not a valid duration ({err.reason}); using {default_label}"
        return _builtin(default_s, low_s, high_s, default_label, [warning])
    if interval_s == 0:
        return IntervalDecision("once" if zero_as_once else "external", None)
    if interval_s < 0:
        warning = f"{label} is negative; using {default_label}"
        return _builtin(default_s, low_s, high_s, default_label, [warning])
    return _builtin(interval_s, low_s, high_s, label, [])


def clamp_interval(
    interval_s: float,
    *,
    subject: str,
    min_s: float | None = None,
    max_s: float | None = None,
) -> IntervalDecision:
    """A positive interval already parsed (a tasks file's ``interval``) held to the same bounds
    as ``parse_interval``: a built-in decision, with a warning naming ``subject`` (never the
    value) when clamping changes it. ``ValueError`` for a bound or interval that is not a
    positive, finite number of seconds."""
    interval_s = _check_seconds("interval_s", interval_s)
    low_s = None if min_s is None else _check_seconds("min_s", min_s)
    high_s = None if max_s is None else _check_seconds("max_s", max_s)
    if low_s is not None and high_s is not None and low_s > high_s:
        low_s, high_s = high_s, low_s
    return _builtin(interval_s, low_s, high_s, subject, [])


def _builtin(
    interval_s: float,
    low_s: float | None,
    high_s: float | None,
    subject: str,
    warnings: list[str],
) -> IntervalDecision:
    """A built-in decision clamped to the bounds; ``subject`` names the value in warnings."""
    if low_s is not None and interval_s < low_s:
        warnings.append(
            f"{subject} is below the minimum {format_duration(low_s)}; using the minimum"
        )
        interval_s = low_s
    elif high_s is not None and interval_s > high_s:
        warnings.append(
            f"{subject} is above the maximum {format_duration(high_s)}; using the maximum"
        )
        interval_s = high_s
    return IntervalDecision("builtin", interval_s, tuple(warnings))


def _check_seconds(name: str, value: float) -> float:
    seconds = float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_DURATION_S):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return seconds


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
