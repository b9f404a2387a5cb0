"""Job rows and finishes the integration tests share: made through the store and the planner,
as the runner makes them."""

from __future__ import annotations

from datetime import datetime, timedelta

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


def success(c: Claimed, at: datetime) -> Finish:
    """The finish of a claimed run that succeeded at ``at``, as the planner writes it."""
    return plan_finish(
        c,
        ok=True,
        cancelled=False,
        error=None,
        output={"ok": 1},
        started_at=at,
        finished_at=at,
        default_max_attempts=3,
        backoff_base_s=60.0,
    )
