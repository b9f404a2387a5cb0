"""The segments ``logs`` readers send, encoded once for all of them: whatever the readers' pace
and the run's reads, each reader gets every line once, in order, with its stream; the readers
of the same lines share one encoding; and the cache stays within its bound."""

from __future__ import annotations

import asyncio
import json
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.journal import Journal, RunLog
from daemon.core.runqueue import RunQueue, RunRequest, RunResult
from daemon.server.answers import AnswerStream
from daemon.server.logstream import LogReader
from daemon.server.segments import SegmentCache

DONE = RunResult(ok=True, exit_code=0, duration_ms=5)


class _Stream:
    """What a reader writes its lines to: what ``fill`` queues, taken by the test."""

    def __init__(self, batch: bool) -> None:
        self.batch = batch
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.finished = False
        self.sent = bytearray()

    def wake(self) -> None:
        pass

    def queue_lines(self, chunks: list[bytes], size_bytes: int) -> None:
        self.pending.extend(chunks)
        self.pending_bytes += size_bytes

    def last_line_queued(self) -> None:
        self.finished = True

    def take(self) -> None:
        self.sent += b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0


def _received(sent: bytes, batch: bool) -> list[tuple[str, str]]:
    """The (stream, line) pairs of a reader's answer, batched or a line each."""
    got: list[tuple[str, str]] = []
    at = 0
    while at < len(sent):
        newline = sent.index(b"\n", at)
        event = json.loads(sent[at:newline])
        at = newline + 1
        if event["event"] != "output":
            continue
        if batch:
            data = sent[at : at + event["bytes"]].decode()
            at += event["bytes"]
            got.extend((event["stream"], line) for line in data.split("\n")[:-1])
        else:
            got.append((event["stream"], event["line"]))
    return got


def _following(
    count: int, batch: bool, cache: SegmentCache, loop: asyncio.AbstractEventLoop | None = None
) -> tuple[RunLog, list[LogReader]]:
    """``count`` readers following a run whose log keeps every line; with ``loop`` (one that
    never runs) its reads are all of one loop turn: a stream's lines are under one mark."""
    journal = Journal()
    run = RunQueue(4).submit(RunRequest(task="chatty", trigger="tick"))
    log = journal.current = RunLog(run, 64 * 1024 * 1024, loop)
    readers = []
    for _ in range(count):
        reader = LogReader(cast(AnswerStream, _Stream(batch)), journal, True, cache)
        reader.read(log)
        readers.append(reader)
    return log, readers


steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(["stdout", "stderr"]), st.integers(1, 900)),
        st.tuples(st.just("read"), st.integers(0, 2), st.integers(1, 40_000)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=steps, batch=st.booleans(), cache_bytes=st.integers(0, 60_000), one_turn=st.booleans())
def test_every_follower_gets_every_line_in_order_whatever_the_interleaving(
    steps: list[tuple[str, str | int, int]], batch: bool, cache_bytes: int, one_turn: bool
) -> None:
    cache = SegmentCache(cache_bytes)
    loop = asyncio.new_event_loop() if one_turn else None
    try:
        _follow_along(steps, batch, cache, loop)
    finally:
        if loop is not None:
            loop.close()


def _follow_along(
    steps: list[tuple[str, str | int, int]],
    batch: bool,
    cache: SegmentCache,
    loop: asyncio.AbstractEventLoop | None,
) -> None:
    log, readers = _following(3, batch, cache, loop)
    written: list[tuple[str, str]] = []
    for kind, what, count in steps:
        if kind == "write":
            lines = [f"{what} line {len(written) + n}" for n in range(count)]
            log.add_lines(str(what), lines)
            written.extend((str(what), line) for line in lines)
        else:
            reader = readers[int(what)]
            reader.fill(reader.stream, count)  # a budget: a reader's pace
            cast(_Stream, reader.stream).take()
        assert cache.bytes <= cache.bytes_max
        assert cache.bytes == sum(map(len, cache._frames.values()))
    log.end(DONE)
    for reader in readers:
        stream = cast(_Stream, reader.stream)
        while not stream.finished:
            reader.fill(reader.stream, 1 << 20)
            stream.take()
        assert _received(bytes(stream.sent), batch) == written
        reader.close()
    assert cache.readers == 0
    assert len(cache) == 0, "kept with no reader left"


def test_followers_that_keep_up_share_one_encoding_of_each_segment() -> None:
    cache = SegmentCache()
    log, readers = _following(3, True, cache)
    log.add_lines("stdout", [f"line {n}" for n in range(3000)])
    frames = []
    for reader in readers:
        reader.fill(reader.stream, 1 << 20)
        frames.append(reader.stream.pending)
    assert len(frames[0]) == 3  # cut on the grid of 1,024 lines
    assert all(a is b for other in frames[1:] for a, b in zip(frames[0], other, strict=True))


def test_a_reader_elsewhere_meets_the_others_on_the_grid() -> None:
    """A reader that took part of a segment (its budget ran out) sends the rest of it, then
    the very segments the others sent."""
    cache = SegmentCache()
    log, (ahead, behind) = _following(2, True, cache)
    log.add_lines("stdout", [f"line {n}" for n in range(3000)])
    ahead.fill(ahead.stream, 1 << 20)
    behind.fill(behind.stream, 4000)  # part of the first segment
    cast(_Stream, behind.stream).take()
    behind.fill(behind.stream, 1 << 20)
    assert behind.stream.pending[0] is not ahead.stream.pending[0]  # the rest of the first
    shared = zip(behind.stream.pending[1:], ahead.stream.pending[1:], strict=True)
    assert all(a is b for a, b in shared)


def test_a_lone_reader_keeps_nothing_and_the_bound_drops_the_oldest() -> None:
    cache = SegmentCache(bytes_max=100)
    cache.opened()
    assert cache.keep(("r1", 0, 1, True), b"x" * 40) == b"x" * 40
    assert len(cache) == 0, "one reader never meets its own segments again"
    cache.opened()
    for seq in range(4):
        cache.keep(("r1", seq, 1, True), b"x" * 40)
    assert cache.get(("r1", 0, 1, True)) is None
    assert cache.get(("r1", 3, 1, True)) == b"x" * 40
    assert cache.bytes == 80
    cache.keep(("r1", 9, 1, True), b"y" * 101)  # more than the bound: never kept
    assert cache.bytes == 80
    cache.closed()
    assert (len(cache), cache.bytes) == (0, 0)
