"""What every schedule form is: a ``Schedule`` with its canonical text, and the few text and
time helpers the forms share."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime

from daemon.schedules.dst import DstMark
from daemon.schedules.duration import ASCII_SPACE

SPACE = re.compile("[" + ASCII_SPACE + "]+")


@dataclass(frozen=True)
class Schedule(ABC):
    """A parsed schedule: ``spec`` as given, its ``tz`` and its canonical ``text``."""

    spec: str
    tz: str
    text: str

    @abstractmethod
    def next_after(self, t: datetime) -> datetime | None:
        """First occurrence strictly after the aware datetime ``t``, in UTC.

        None when there is none: a one-shot whose time is not after ``t``, or an
        occurrence beyond what ``datetime`` can hold. Naive ``t``: ``ValueError``.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short English description for people."""

    def dst_mark(self, planned: datetime) -> DstMark | None:
        """What an offset change did to ``planned``, a time ``next_after`` gave (None: nothing).
        A form whose times follow wall clocks says it; elapsed time never moves."""
        return None


def split_first(text: str) -> tuple[str, str]:
    """Split at the first run of ASCII whitespace into (head, rest), rest possibly empty."""
    parts = SPACE.split(text, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


def lower_ascii(word: str) -> str:
    """Keywords, day names and ``@`` macros are ASCII, any case. Other text is left as it is:
    ``str.lower`` would turn some non-ASCII letters into ASCII ones (the Kelvin sign into ``k``)."""
    return word.lower() if word.isascii() else word


def as_utc(t: datetime) -> datetime:
    if type(t) is datetime and t.tzinfo is UTC:  # the common case, twice per claimed run
        return t
    if not isinstance(t, datetime):
        raise TypeError(f"expected a datetime, got {type(t).__name__}")
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"expected an aware datetime (UTC), got naive {t.isoformat()}")
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"datetime out of range: {t.isoformat()}") from None
