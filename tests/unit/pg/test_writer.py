"""The result writer: a record that fails its batch for what it holds fails alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from daemon.pg.health import DbHealth
from daemon.pg.store.base import Finish, WriteBatch, WriteOutcome
from daemon.pg.writer import UNSTORABLE, ResultWriter

AT = datetime(2026, 1, 1, tzinfo=UTC)


def finish(run_id: int, output: dict[str, object] | None = None) -> Finish:
    return Finish(run_id, run_id, "succeeded", AT, AT, output, None, AT, None, None, 0)


class PickyStore:
    """Refuses (as a database would a statement) every batch holding a poisoned output."""

    def __init__(self) -> None:
        self.written: list[Finish] = []
        self.tries = 0

    async def write(self, owner: str, batch: WriteBatch) -> WriteOutcome:
        self.tries += 1
        if any(f.output == {"poison": True} for f in batch.finishes):
            raise ValueError("unsupported Unicode escape sequence")
        self.written.extend(batch.finishes)
        return WriteOutcome(lost_run_ids=frozenset())


async def test_a_record_that_fails_its_batch_is_written_alone_and_bare_the_others_as_they_are() -> (
    None
):
    store = PickyStore()
    landed: list[tuple[WriteBatch, WriteOutcome]] = []
    writer = ResultWriter(store, "me", DbHealth(), lambda b, o: landed.append((b, o)))  # type: ignore[arg-type]
    for run_id in range(1, 6):
        writer.finish(finish(run_id, {"poison": True} if run_id == 3 else {"n": run_id}))
    closing = asyncio.Event()
    closing.set()  # write what is queued, then return
    await asyncio.wait_for(writer.run(closing), 10.0)
    by_run = {f.run_id: f for f in store.written}
    assert sorted(by_run) == [1, 2, 3, 4, 5]  # every run recorded, once
    assert [by_run[i].output for i in (1, 2, 4, 5)] == [{"n": 1}, {"n": 2}, {"n": 4}, {"n": 5}]
    assert (by_run[3].output, by_run[3].error, by_run[3].status) == (None, UNSTORABLE, "succeeded")
    assert all(not outcome.lost_run_ids for _batch, outcome in landed)
    # the batch, then each record alone, then the poisoned one once more without its output
    assert store.tries == 1 + 5 + 1
