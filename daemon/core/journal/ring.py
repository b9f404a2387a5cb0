"""One run's output as the journal keeps it: its newest lines within a bound in bytes.

Past the bound the oldest lines go down to seven eighths of it, so a trim is not paid at every
line. Readers keep their own positions, so a slow one holds no copy. The hot path appends the
text alone: a line's stream and time are kept once per run of lines (a *mark*).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable
from typing import Any

from daemon.core.journal.follow import FollowerHold
from daemon.core.journal.sizes import LINE_BYTES, MARK_BYTES, line_bytes
from daemon.core.journal.trim import oldest_to_drop
from daemon.core.process.flow import OutputFlow
from daemon.core.runqueue import Run, RunResult
from daemon.log.logs import get_logger

log = get_logger("runbroker.journal")

LineRecord = tuple[str, str, float]  # (stream, line, at)
Wake = Callable[[], None]  # a follower: told that a line came or that the run ended

_now = time.time
_NONE: list[Any] = []  # what a log's lists are until its first line: never appended to


class RunLog:
    """The output of one run, bounded at ``bytes_max``: the newest lines are kept."""

    __slots__ = (
        "_lines",
        "_loop",
        "_seqs",
        "_stream",
        "_streams",
        "_times",
        "_wake_due",
        "bytes",
        "bytes_max",
        "first_seq",
        "flow",
        "followers",
        "readers",
        "result",
        "run_id",
        "started_at",
        "task",
        "trigger",
    )

    def __init__(
        self, run: Run, bytes_max: int, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        # Cheap for a run that prints nothing (a no-op handler's): its lists come with its
        # first line (``_mark``), its start time from the run once it is marked started.
        request = run.request
        self.run_id = run.id
        self.task = request.task
        self.trigger = request.trigger
        self.started_at = 0.0  # set by the executor (``Run.started_at``)
        self.result: RunResult | None = None  # set when the run ends
        self.bytes_max = bytes_max
        self.bytes = 0
        self.first_seq = 0  # the first kept line's number: as many were dropped before it
        # The kept lines, and the marks: from line _seqs[i] on, the stream _streams[i], read at
        # _times[i]. Shared empty lists until the first line.
        self._lines: list[str] = _NONE
        self._seqs: list[int] = _NONE
        self._streams: list[str] = _NONE
        self._times: list[float] = _NONE
        self._stream: str | None = None  # the last mark's, until the end of its loop turn
        self._loop = loop
        self.followers: list[Wake] = _NONE  # the readers that follow (``follow``)
        self.flow: OutputFlow | None = None  # who holds the running run's output back
        self.readers: list[FollowerHold] = _NONE  # followers whose unread lines a trim keeps
        self._wake_due = False  # the followers are woken at the end of this loop turn

    def add(self, stream: str, line: str) -> None:
        """One line of the run."""
        self.add_lines(stream, [line])

    def add_lines(self, stream: str, lines: list[str]) -> None:
        """The lines of one read of the run's pipe (the hot path: appended, counted at C
        speed, nothing built for each)."""
        if stream is not self._stream:  # another stream, or the first read of a loop turn
            self._mark(stream)
        self._lines.extend(lines)
        if all(map(str.isascii, lines)):
            size = self.bytes + sum(map(len, lines)) + LINE_BYTES * len(lines)
        else:
            size = self.bytes + sum(map(line_bytes, lines))
        self.bytes = size
        if size > self.bytes_max:
            self._trim()
        if self.followers and not self._wake_due:
            self._wake_soon()

    def _wake_soon(self) -> None:
        """Wake the followers once a loop turn, however many lines it read: not at each line."""
        if self._loop is None:  # without a loop (a test): at once
            self._tell(self.followers)
            return
        self._wake_due = True
        self._loop.call_soon(self._wake_followers)

    def _wake_followers(self) -> None:
        self._wake_due = False
        self._tell(self.followers)

    def _tell(self, followers: list[Wake]) -> None:
        """Wake each follower. One that raises is let go, never the executor's loop with it."""
        for wake in tuple(followers):
            try:
                wake()
            except Exception as exc:
                self.unfollow(wake)
                log.warning("journal.follower_failed", run_id=self.run_id, error=type(exc).__name__)

    def _mark(self, stream: str) -> None:
        if self._lines is _NONE:  # the first line: the log's own lists
            self._lines, self._seqs, self._streams, self._times = [], [], [], []
        self._seqs.append(self.first_seq + len(self._lines))
        self._streams.append(stream)
        self._times.append(_now())
        self.bytes += MARK_BYTES
        if self._loop is not None:  # without one (a test), every line has its own mark
            self._stream = stream
            self._loop.call_soon(self._stale)

    def _stale(self) -> None:  # the next line, from the next read, gets a mark of its own
        self._stream = None

    def _trim(self) -> None:
        """Drop the oldest lines (and marks) down to ``low_water_bytes``.

        Never lines a follower still reading has not read: it holds the run's output back instead
        (``FollowerHold``) until it has caught up or is let go."""
        lines, seqs, target = self._lines, self._seqs, self.low_water_bytes
        readers = [reader for reader in self.readers if not reader.let_go]
        floor = min((reader.seq for reader in readers), default=None)
        was = self.first_seq, self.bytes
        head, first, size, mark = oldest_to_drop(lines, seqs, *was, target, None)
        if floor is not None and floor < first:
            behind = [reader for reader in readers if reader.seq < first]
            taken = [reader.take(self.flow) for reader in behind]  # each of them, not the first
            if all(taken):
                head, first, size, mark = oldest_to_drop(lines, seqs, *was, target, floor)
            else:  # nothing can be held (holding is off, or the job is gone): they lose lines
                for reader in behind:
                    reader.release()
        if head == len(lines):
            self._stream = None
        self.first_seq, self.bytes = first, size
        # Let go of the dropped lines and marks at once: the bound counts all that is held.
        if head:
            del lines[:head]
        if mark:
            del seqs[:mark], self._streams[:mark], self._times[:mark]

    @property
    def low_water_bytes(self) -> int:
        """What a trim leaves at most: seven eighths of the bound."""
        return self.bytes_max - (self.bytes_max >> 3)

    @property
    def end_seq(self) -> int:
        """The number the next line will have: how many lines the run has written so far."""
        return self.first_seq + len(self._lines)

    @property
    def mark_count(self) -> int:
        return len(self._seqs)

    @property
    def line_count(self) -> int:
        """How many lines are kept."""
        return len(self._lines)

    def line_at(self, seq: int) -> LineRecord:
        """The kept line numbered ``seq`` (``first_seq <= seq < end_seq``)."""
        if not self.first_seq <= seq < self.end_seq:
            raise IndexError(seq)
        stream, at, lines = self.segment(seq, seq + 1, 1)
        return stream, lines[0], at

    def segment(self, seq: int, end: int, most: int) -> tuple[str, float, list[str]]:
        """Kept lines from ``seq`` on (``first_seq <= seq < end <= end_seq``), at most ``most``,
        all under one mark: their stream, when they were read, and a copy of their text."""
        seqs = self._seqs
        mark = bisect.bisect_right(seqs, seq) - 1
        stop = min(end, seq + most)
        if mark + 1 < len(seqs):
            stop = min(stop, seqs[mark + 1])
        first = self.first_seq
        return self._streams[mark], self._times[mark], self._lines[seq - first : stop - first]

    def lines(self) -> list[LineRecord]:
        """The kept lines, oldest first (a copy)."""
        return [self.line_at(seq) for seq in range(self.first_seq, self.end_seq)]

    def follow(self, wake: Wake, reader: FollowerHold | None = None) -> None:
        """Follow the run's lines: ``wake`` is called at each read and at the end.

        ``reader`` keeps the follower's unread lines from a trim while it may hold the run back."""
        if self.followers is _NONE:
            self.followers = []
        self.followers.append(wake)
        if reader is not None:
            if self.readers is _NONE:
                self.readers = []
            self.readers.append(reader)

    def end(self, result: RunResult) -> None:
        """The run has its result: followers are told a last time and let go."""
        self.result = result
        self.flow = None
        self.readers = _NONE
        followers = self.followers
        if followers:
            self.followers = _NONE
            self._tell(followers)

    def unfollow(self, wake: Wake, reader: FollowerHold | None = None) -> None:
        if wake in self.followers:
            self.followers.remove(wake)
        if reader is not None and reader in self.readers:
            self.readers.remove(reader)

    @property
    def finished_at(self) -> float | None:
        result = self.result
        if result is None:
            return None
        return self.started_at + result.duration_ms / 1000
