"""The interval rules (the README's `INTERVAL`): what an interval setting means for the ticker,
and the bounds every interval is held to, in ``daemon.schedules.duration``'s durations
(re-exported here for the modules that read both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from daemon.schedules.duration import (
    ASCII_SPACE,
    MAX_DURATION_S,
    DurationError,
    format_duration,
    parse_duration,
)

__all__ = [
    "MAX_DURATION_S",
    "MIN_INTERVAL_S",
    "DurationError",
    "IntervalDecision",
    "IntervalMode",
    "clamp_interval",
    "format_duration",
    "parse_duration",
    "parse_interval",
]

IntervalMode = Literal["builtin", "external", "once"]

# The floor of every interval: the interval settings and a task's own ``interval`` are clamped
# to it with a warning, and ``runbroker jobs add`` refuses a job that would repeat faster (a
# tighter loop only spins: each run costs a claim, a process and a record).
MIN_INTERVAL_S = 0.05


@dataclass(frozen=True)
class IntervalDecision:
    """What an interval setting means for the ticker.

    ``mode`` is ``builtin`` (tick every ``interval_s`` seconds), ``external`` (runs only when
    triggered) or ``once`` (run once). ``warnings`` are ready to log."""

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
    """Apply the interval rules (the README's ``RUNBROKER_INTERVAL``) to a raw setting.

    Never raises for any text, because a bad setting must start the daemon at the default with a
    warning. ``ValueError`` only for bad bounds, which are the caller's own."""
    default_s = _check_seconds("default_s", default_s)
    low_s = None if min_s is None else _check_seconds("min_s", min_s)
    high_s = None if max_s is None else _check_seconds("max_s", max_s)
    if low_s is not None and high_s is not None and low_s > high_s:
        low_s, high_s = high_s, low_s
    label = "interval" if redact else f"interval {raw!r}"
    default_label = f"the default interval {format_duration(default_s)}"

    text = "" if raw is None else raw.strip(ASCII_SPACE)
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
    """A built-in decision clamped to the bounds. ``subject`` names the value in warnings."""
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
