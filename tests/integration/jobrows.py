"""Job rows and finishes the integration tests share: made through the store and the planner,
as the runner makes them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from daemon.pg.plan import plan_finish
from daemon.pg.store.admin_records import NewJob
from daemon.pg.store.base import Claimed, Finish
from daemon.pg.store.postgres import PostgresStore


async def add(store: PostgresStore, name: str, *, delay_s: float = 0.0, **kw: object) -> None:
    """A job ``name`` (task default, every hour, UTC unless ``kw`` says otherwise), due now or
    ``delay_s`` from now by the database's clock unless ``kw`` names its ``next_run_at``."""
    now = await store.admin.db_now()
    fields: dict[str, object] = {"task": "default", "schedule": "every 1h", "tz": "UTC"}
    fields.update(kw)
    fields.setdefault("next_run_at", now + timedelta(seconds=delay_s))
    await store.admin.add_job(NewJob(name=name, **fields))  # type: ignore[arg-type]


async def add_apart(dsn: str, *names: str, delay_s: float = 0.0, **kw: object) -> None:
    """Jobs ``names`` (each as ``add`` makes it) through a store of their own, closed again at
    once: the replicas under test keep their stores to themselves."""
    store = PostgresStore(dsn)
    try:
        for name in names:
            await add(store, name, delay_s=delay_s, **kw)
    finally:
        await store.close()


def success(
    c: Claimed,
    at: datetime,
    *,
    finished_at: datetime | None = None,
    output: dict[str, Any] | None = None,
) -> Finish:
    """The finish of a claimed run that succeeded, started at ``at`` and finished then or at
    ``finished_at``, with ``output`` (default ``{"ok": 1}``), as the planner writes it."""
    return plan_finish(
        c,
        ok=True,
        cancelled=False,
        error=None,
        output={"ok": 1} if output is None else output,
        started_at=at,
        finished_at=at if finished_at is None else finished_at,
        default_max_attempts=3,
        backoff_base_s=60.0,
    )
