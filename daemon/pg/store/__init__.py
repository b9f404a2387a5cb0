"""Job store: the runner's port (``base``), PostgreSQL (``postgres``, its SQL in ``queries``),
a fake (``memory``); the records of the ``jobs`` commands are in ``admin_records``."""

from daemon.pg.store.base import (
    Claimed,
    ClaimPlan,
    Dependency,
    DependencyState,
    DueJob,
    Finish,
    JobStore,
    Outlook,
    Release,
    SchedulerFlags,
    Started,
    StoreSchemaMissing,
    StoreUnavailable,
    WriteBatch,
    WriteOutcome,
)

__all__ = [
    "ClaimPlan",
    "Claimed",
    "Dependency",
    "DependencyState",
    "DueJob",
    "Finish",
    "JobStore",
    "Outlook",
    "Release",
    "SchedulerFlags",
    "Started",
    "StoreSchemaMissing",
    "StoreUnavailable",
    "WriteBatch",
    "WriteOutcome",
]
