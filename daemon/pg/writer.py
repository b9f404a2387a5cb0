"""The Postgres runner's plumbing: database health, backoff, and the batched result writer.

Results (run started, run finished, claim released) are queued in memory and written in
batches, one transaction each. While the database is away they wait and are retried with
backoff, so a run that finishes during an outage is recorded when the database returns.

A run's start is written only once the run has been going for ``START_DELAY_S``: a run that
finishes sooner gets one write (its finish carries ``started_at``), not two.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog

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

LOGGER_NAME = "runbroker.pgrunner"
log = structlog.get_logger(LOGGER_NAME)

MAX_BATCH = 500
MAX_BUG_RETRIES = 3
START_DELAY_S = 0.05  # a run's status shows "running" at most this late
# A small batch waits this long for company before it is written: each write is a round trip
# and a commit whatever its size, and while the writer waits the executor finishes more runs.
LINGER_S = 0.002
LINGER_UNDER = 50  # records; a batch this large is written at once


async def first_of(*waitables: Awaitable[Any], timeout_s: float | None = None) -> None:
    """Wait until any of ``waitables`` completes or the timeout passes; cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waitables]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """True if ``event`` is set within ``timeout_s``."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout=max(0.0, timeout_s))
    except TimeoutError:
        return False
    return True


class Backoff:
    """Exponential delays with jitter, from ``initial_s`` up to ``cap_s``; reset on success."""

    def __init__(self, initial_s: float = 0.1, cap_s: float = 5.0) -> None:
        self.initial_s = initial_s
        self.cap_s = cap_s
        self._next_s = initial_s

    def next_s(self) -> float:
        delay_s = self._next_s
        self._next_s = min(self.cap_s, self._next_s * 2)
        return delay_s * random.uniform(0.75, 1.0)

    def reset(self) -> None:
        self._next_s = self.initial_s


class DbHealth:
    """Logs ``db.disconnected`` once when the database goes away, ``db.reconnected`` on return."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self._schema_warned = False
        # why the schema does not fit (not migrated, or older than this runbroker), or None:
        # set by any StoreSchemaMissing, set and cleared only by ``schema_checked``
        self.schema_problem: str | None = None

    @property
    def up(self) -> bool:
        return self.down_since is None

    def schema_checked(self, problem: str | None) -> None:
        """The result of a look at the schema's version."""
        if problem is not None and problem != self.schema_problem:
            log.error("db.schema_problem", error=problem)
        elif problem is None and self.schema_problem is not None:
            log.info("db.schema_ready")
        self.schema_problem = problem

    def failed(self, where: str, exc: BaseException) -> None:
        if isinstance(exc, StoreSchemaMissing):
            self.schema_problem = str(exc)
            if not self._schema_warned:
                self._schema_warned = True
                log.error("db.schema_missing", where=where, error=str(exc))
            return
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning("db.disconnected", where=where, error=str(exc))

    def ok(self) -> None:
        self._schema_warned = False
        if self.down_since is not None:
            down_s = time.monotonic() - self.down_since
            self.down_since = None
            log.info("db.reconnected", down_s=round(down_s, 3))


class ResultWriter:
    """Queues run records and writes them in batches; ``on_written`` learns what landed."""

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
        # by run id, in order: (due, started at as epoch seconds); a Started is built only for
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
        return len(self._pending) + len(self._starts)

    def _start_wait_s(self, closing: bool) -> float | None:
        """Moves the starts that are due (all once closing) to the pending batch; returns how
        long until the next one is, None if none waits."""
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

    async def run(self, closing: asyncio.Event) -> None:
        """Write until ``closing`` is set and nothing is pending (the caller bounds the time)."""
        backoff = Backoff()
        bug_retries = 0
        while True:
            start_wait_s = self._start_wait_s(closing.is_set())
            if not self._pending:
                if start_wait_s is None:
                    self._idle.set()
                    if closing.is_set():
                        return
                self._wakeup.clear()
                await first_of(self._wakeup.wait(), closing.wait(), timeout_s=start_wait_s)
                continue
            if len(self._pending) < LINGER_UNDER and not closing.is_set():
                await asyncio.sleep(LINGER_S)
            batch = self._take()
            try:
                outcome = await self._store.write(self._owner, batch)
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self._health.failed("write", exc)
                self._put_back(batch)
                await self._pause(backoff.next_s())
                continue
            except Exception:
                bug_retries += 1
                log.exception("pgrunner.write_failed", runs=len(batch), attempt=bug_retries)
                if bug_retries < MAX_BUG_RETRIES:
                    self._put_back(batch)
                    await self._pause(backoff.next_s())
                    continue
                outcome = WriteOutcome(lost_run_ids=frozenset(f.run_id for f in batch.finishes))
                log.error("job.result_dropped", runs=len(batch))
            bug_retries = 0
            backoff.reset()
            self._health.ok()
            self._on_written(batch, outcome)
