"""Worker processes for bench_pgrunner.py: ``KIND DSN BATCH NAME``, KIND is rb or pgq.

Each prints ``ready`` once it listens, runs no-op jobs until SIGTERM, then prints one JSON
line with the due-to-started latencies it saw (milliseconds).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from datetime import UTC, datetime

import structlog
import uvloop

from daemon.pgrunner import PgRunner
from daemon.runqueue import RunQueue, RunResult
from daemon.settings import Settings
from daemon.store.postgres import PostgresStore

latencies_ms: list[float] = []


async def runbroker_worker(dsn: str, batch: int, name: str) -> None:
    settings = Settings().model_copy(
        update={"batch_size": batch, "queue_capacity": batch * 2, "poll_interval_s": 60.0}
    )
    queue = RunQueue(settings.queue_capacity)
    runner = PgRunner(
        store=PostgresStore(dsn), queue=queue, settings=settings, known_tasks={"noop"}, owner=name
    )
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)

    async def executor() -> None:
        while (run := await queue.take()) is not None:
            run.mark_started()
            scheduled = datetime.fromisoformat(run.request.context["SCHEDULED_FOR"])
            started = datetime.fromtimestamp(run.started_at or 0, UTC)
            latencies_ms.append((started - scheduled).total_seconds() * 1000)
            run.finish(RunResult(ok=True))
            queue.release(run)

    async def announce() -> None:
        while not runner.listening:  # noqa: ASYNC110 (a bench: polling a flag is fine)
            await asyncio.sleep(0.01)
        print("ready", flush=True)

    async with asyncio.TaskGroup() as group:
        exec_task = group.create_task(executor())
        group.create_task(announce())
        await runner.run(stopping)
        queue.close()
        await exec_task


async def pgqueuer_worker(dsn: str, batch: int, name: str) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    @qm.entrypoint("noop")
    async def noop(job: Job) -> None:
        latencies_ms.append((datetime.now(UTC) - job.created).total_seconds() * 1000)

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, qm.shutdown.set)

    async def announce() -> None:
        await asyncio.sleep(0.5)  # QueueManager.run has set up its LISTEN by then
        print("ready", flush=True)

    async with asyncio.TaskGroup() as group:
        group.create_task(announce())
        await qm.run(batch_size=batch)
    await conn.close()


def main() -> None:
    kind, dsn, batch, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    worker = runbroker_worker if kind == "rb" else pgqueuer_worker
    uvloop.run(worker(dsn, batch, name))
    print(json.dumps({"latencies_ms": latencies_ms}), flush=True)


if __name__ == "__main__":
    main()
