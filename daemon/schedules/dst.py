"""What an offset change did to a planned time: the ``DstMark`` beside it in ``runbroker next``.

A planned time is either what the schedule names, or a wall time the clock skipped, run at the
end of the gap (a fixed-time cron job, an ``at`` wall time), or a wall time the clock shows
twice: a fixed-time job runs it once, at its first pass; a wildcard job at both. Which of these
a form does is its own rule (``cron``, ``at``); this module says it in words and checks the
zone, so that every form marks its times alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

DstKind = Literal["gap", "fold"]
FoldPass = Literal["first", "second"]
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class DstMark:
    """``kind`` gap: ``wall`` did not exist and the slot runs at the end of the gap; fold:
    ``wall`` happened twice and this slot is its ``fold_pass``; ``note`` says it for people."""

    kind: DstKind
    wall: str
    note: str
    fold_pass: FoldPass | None = None


def wall_text(wall: datetime) -> str:
    """A wall time as people read it: ``02:30``, with seconds only when it has some."""
    return f"{wall:%H:%M:%S}" if wall.second else f"{wall:%H:%M}"


def offset_at(utc: datetime, zone: ZoneInfo) -> timedelta:
    offset = utc.astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def is_repeated(wall: datetime, zone: ZoneInfo) -> bool:
    """The naive ``wall`` is shown twice by the clock of ``zone`` (it lies in a fold)."""
    first = wall.replace(tzinfo=zone, fold=0).utcoffset()
    second = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert first is not None
    assert second is not None
    return second < first


def gap_before(utc: datetime, zone: ZoneInfo) -> timedelta:
    """How far the clock jumped forward right at ``utc`` (zero when it did not)."""
    jump = offset_at(utc, zone) - offset_at(utc - _SECOND, zone)
    return max(jump, timedelta(0))


def gap_mark(local: datetime, jump: timedelta, skipped: Sequence[datetime]) -> DstMark:
    """A slot moved to ``local``, the end of a gap of ``jump``, for the ``skipped`` wall times."""
    walls = ", ".join(wall_text(wall) for wall in skipped) or "its wall time"
    start = local.replace(tzinfo=None) - jump
    note = (
        f"{walls} did not exist (clocks went forward from {wall_text(start)} to "
        f"{wall_text(local)}); runs at {wall_text(local)}, the end of the gap"
    )
    return DstMark("gap", walls, note)


def fold_mark(local: datetime, *, runs_both: bool) -> DstMark:
    """A slot at a wall time the clock shows twice; ``local.fold`` says which pass it is."""
    wall = wall_text(local)
    fold_pass: FoldPass = "second" if local.fold else "first"
    if runs_both:
        note = f"{wall} happened twice (clocks went back); runs at both, this is the {fold_pass}"
    else:
        note = f"{wall} happened twice (clocks went back); runs once, at its first pass"
    return DstMark("fold", wall, note, fold_pass)
