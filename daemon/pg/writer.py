"""The Postgres runner's result writer: run records written in batches.

Records wait in memory while the database is away, so a run that finishes during an outage is
recorded when it returns. A failed batch is written again one record at a time, so that one bad
record fails alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from daemon.log.logs import get_logger
from daemon.pg.health import LOGGER_NAME, Backoff, DbHealth
from daemon.pg.store.base import (
    Finish,
    JobStore,
    Release,
    Started,
    StoreSchemaMissing,
    StoreUnavailable,
    WriteBatch,
    WriteOutcome,
)
from daemon.pg.waits import first_of, wait_event

log = get_logger(LOGGER_NAME)

MAX_BATCH = 500
UNSTORABLE = "its result could not be stored"  # the note a finish that failed alone keeps
START_DELAY_S = 0.05  # a run's status shows "running" at most this late
# A small batch waits this long for company before it is written: each write is a round trip
# and a commit whatever its size, and while the writer waits the executor finishes more runs.
LINGER_S = 0.002
LINGER_UNDER = 50  # records: a batch this large is written at once


class ResultWriter:
    """Queues run records and writes them in batches. ``on_written`` learns what landed."""

    def __init__(
        self,
        store: JobStore,
        owner: str,
        health: DbHealth,
        on_written: Callable[[WriteBatch, WriteOutcome], None],
    ) -> None:
        self._store = store
        self._owner = owner
        self._health = health
        self._on_written = on_written
        self._pending = WriteBatch()  # due now (starts only after a failed write)
        self._alone: list[WriteBatch] = []  # one record each: what a failed batch held
        # by run id, in order: (due, started at as epoch seconds). A Started is built only for
        # the runs still going when theirs is due (most finish first and never need one)
        self._starts: dict[int, tuple[float, float]] = {}
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def start(self, run_id: int, started_at_epoch: float) -> None:
        first = not self._starts
        self._starts[run_id] = (time.monotonic() + START_DELAY_S, started_at_epoch)
        self._idle.clear()
        if first:  # the writer may be waiting without a timer
            self._wakeup.set()

    def finish(self, item: Finish) -> None:
        self._starts.pop(item.run_id, None)
        self._pending.finishes.append(item)
        self._poke()

    def release(self, item: Release) -> None:
        self._starts.pop(item.run_id, None)
        self._pending.releases.append(item)
        self._poke()

    def _poke(self) -> None:
        self._idle.clear()
        self._wakeup.set()

    def __len__(self) -> int:
        return len(self._pending) + len(self._starts) + len(self._alone)

    def _start_wait_s(self, closing: bool) -> float | None:
        """Move the starts that are due (all of them once closing) to the pending batch.

        Returns how long until the next one is due, None if none waits."""
        now = time.monotonic()
        while self._starts:
            run_id = next(iter(self._starts))
            due, started_at_epoch = self._starts[run_id]
            if due > now and not closing:
                return due - now
            del self._starts[run_id]
            self._pending.starts.append(
                Started(run_id, datetime.fromtimestamp(started_at_epoch, UTC))
            )
        return None

    def _take(self) -> WriteBatch:
        pending = self._pending
        batch = WriteBatch(
            pending.starts[:MAX_BATCH], pending.finishes[:MAX_BATCH], pending.releases[:MAX_BATCH]
        )
        self._pending = WriteBatch(
            pending.starts[MAX_BATCH:], pending.finishes[MAX_BATCH:], pending.releases[MAX_BATCH:]
        )
        return batch

    def _put_back(self, batch: WriteBatch) -> None:
        self._pending = WriteBatch(
            batch.starts + self._pending.starts,
            batch.finishes + self._pending.finishes,
            batch.releases + self._pending.releases,
        )

    def nudge(self) -> None:
        """Retry now (the database is back)."""
        self._wakeup.set()

    async def _pause(self, delay_s: float) -> None:
        self._wakeup.clear()
        await wait_event(self._wakeup, delay_s)

    async def wait_idle(self, timeout_s: float) -> bool:
        """True once everything queued so far is written (or given up on)."""
        return await wait_event(self._idle, timeout_s)

    def _split(self, batch: WriteBatch) -> None:
        """``batch`` failed for what it holds: its records to be written one by one, first."""
        alone = [WriteBatch(starts=[s]) for s in batch.starts]
        alone += [WriteBatch(finishes=[f]) for f in batch.finishes]
        self._alone[:0] = alone + [WriteBatch(releases=[r]) for r in batch.releases]

    def _failed_alone(self, batch: WriteBatch) -> WriteOutcome | None:
        """A record that fails alone: a finish is tried once more as a bare record.

        None means it is put back for that. Anything else is given up."""
        finish = batch.finishes[0] if batch.finishes else None
        if finish is not None and finish.error != UNSTORABLE:
            bare = replace(finish, output=None, error=UNSTORABLE)
            self._alone.insert(0, WriteBatch(finishes=[bare]))
            return None
        log.error("job.result_dropped", runs=len(batch))
        return WriteOutcome(lost_run_ids=frozenset(f.run_id for f in batch.finishes))

    async def run(self, closing: asyncio.Event) -> None:
        """Write until ``closing`` is set and nothing is pending (the caller bounds the time)."""
        backoff = Backoff()
        while True:
            start_wait_s = self._start_wait_s(closing.is_set())
            if not self._pending and not self._alone:
                if start_wait_s is None:
                    self._idle.set()
                    if closing.is_set():
                        return
                self._wakeup.clear()
                await first_of(self._wakeup.wait(), closing.wait(), timeout_s=start_wait_s)
                continue
            alone = bool(self._alone)
            if alone:
                batch = self._alone.pop(0)
            else:
                if len(self._pending) < LINGER_UNDER and not closing.is_set():
                    await asyncio.sleep(LINGER_S)
                batch = self._take()
            try:
                outcome = await self._store.write(self._owner, batch)
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self._health.failed("write", exc)
                if alone:
                    self._alone.insert(0, batch)
                else:
                    self._put_back(batch)
                await self._pause(backoff.next_s())
                continue
            except Exception:
                log.exception("pgrunner.write_failed", runs=len(batch))
                if len(batch) > 1:
                    self._split(batch)
                    continue
                failed = self._failed_alone(batch)
                if failed is None:
                    await self._pause(backoff.next_s())  # a database failing every write
                    continue
                outcome = failed
            backoff.reset()
            self._health.ok()
            self._on_written(batch, outcome)
