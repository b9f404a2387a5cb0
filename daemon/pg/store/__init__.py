"""Job store: the runner's port (``base``), PostgreSQL (``postgres``, its SQL in ``queries``) and
a fake (``memory``).
"""

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
