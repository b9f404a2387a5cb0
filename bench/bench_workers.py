"""Worker processes for bench_pgrunner.py: ``KIND DSN BATCH NAME``, KIND is rb or pgq.

Each prints ``ready`` once it listens, runs no-op jobs until SIGTERM, then prints one JSON
line with the due-to-started latencies it saw (milliseconds).

Both sides do the same work per job: an ``async def`` handler that notes its latency. The
runbroker side runs it through the daemon's real parts (PgRunner, RunQueue, Executor with a
Python handler task), the pgqueuer side through a QueueManager entrypoint. Logging is at
WARNING on both sides, each with its real set-up (runbroker's ``configure_logging``).

``RUNBROKER_BENCH_PROFILE=DIR`` (runbroker side only) writes a pyinstrument profile of the
worker's whole life to DIR/NAME.txt.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import uvloop

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue
from daemon.core.tasks import RunContext, Task, TaskRegistry
from daemon.log.logs import configure_logging
from daemon.pg.runner import PgRunner
from daemon.pg.store.postgres import PostgresStore
from daemon.settings import Settings

latencies_ms: list[float] = []


async def noop_handler(run: RunContext) -> dict[str, Any] | None:
    scheduled = datetime.fromisoformat(run.context["SCHEDULED_FOR"])
    latencies_ms.append((datetime.now(UTC) - scheduled).total_seconds() * 1000)
    return None


async def runbroker_worker(dsn: str, batch: int, name: str) -> None:
    settings = Settings().model_copy(
        update={"batch_size": batch, "queue_capacity": batch * 2, "poll_interval_s": 60.0}
    )
    await serve_replica(dsn, settings, Task(name="noop", handler=noop_handler), name)


async def serve_replica(dsn: str, settings: Settings, task: Task, name: str) -> None:
    """One runbroker replica running ``task``'s database jobs until SIGTERM; says "ready" on
    stdout once it listens (bench_replicas runs these too)."""
    queue = RunQueue(settings.queue_capacity)
    tasks = TaskRegistry({task.name: task})
    executor = Executor(queue, tasks, ChildSupervisor(), default_grace_s=1.0, base_env={})
    runner = PgRunner(
        store=PostgresStore(dsn),
        queue=queue,
        settings=settings,
        known_tasks={task.name},
        owner=name,
    )
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)

    async def announce() -> None:
        while not runner.listening:  # noqa: ASYNC110 (a bench: polling a flag is fine)
            await asyncio.sleep(0.01)
        print("ready", flush=True)

    async with asyncio.TaskGroup() as group:
        exec_task = group.create_task(executor.run_forever())
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
    if kind == "rb":  # the daemon's own logging set-up, as with RUNBROKER_LOG_LEVEL=warning
        configure_logging("json", "warning", stream=sys.stderr)
    else:
        logging.basicConfig(level=logging.WARNING)
    worker = runbroker_worker if kind == "rb" else pgqueuer_worker
    profile_dir = os.environ.get("RUNBROKER_BENCH_PROFILE")
    if profile_dir and kind == "rb":
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
        uvloop.run(worker(dsn, batch, name))
        profiler.stop()
        with open(os.path.join(profile_dir, f"{name}.txt"), "w") as out:
            out.write(profiler.output_text(unicode=False, show_all=False))
    else:
        uvloop.run(worker(dsn, batch, name))
    print(json.dumps({"latencies_ms": latencies_ms}), flush=True)


if __name__ == "__main__":
    main()
