"""The shapes of the ``status`` and ``health`` answers, as mypy checks them.

Scripts and probes read these answers (``runbroker status --json``, ``health``), so their
fields are part of the wire: the builders return these types and cannot drop or rename a field
unseen. What each field means is in the README ("Observability").
"""

from typing import Literal, NotRequired, TypedDict


class QueueFigures(TypedDict):
    capacity: int
    waiting: int
    accepted: int
    rejected_full: int
    rejected_closed: int
    finished: int
    closed: bool


class RunSummary(TypedDict):
    id: str
    task: str
    trigger: str


class CurrentRun(RunSummary):
    elapsed_ms: int


class StrayRun(TypedDict):
    """A run whose handler ignored its cancellation past its grace: it has its result, and the
    handler still runs."""

    id: str
    task: str
    started_at: str  # RFC 3339, UTC
    given_up_at: str  # when the executor stopped waiting for it


class WaitingRun(RunSummary):
    position: int


class RecentRun(RunSummary):
    ok: NotRequired[bool]
    reason: NotRequired[str]
    code: NotRequired[str]  # beside a reason (``reasons.CODE_*``), empty without one
    exit_code: NotRequired[int | None]
    duration_ms: NotRequired[int]
    finished_at: str | None


class TickSummary(TypedDict):
    task: str
    schedule: str
    tz: str | None
    next_at: str | None
    last_at: str | None


class SlotEntry(TypedDict):
    planned_at: str  # RFC 3339, UTC: the slot's planned time (the first, when count > 1)
    outcome: str  # ran, skipped, coalesced, missed or caught_up
    count: int  # how many slots this entry stands for (a late tick covers several)
    run_id: str | None  # ran, caught_up: its run; coalesced: the run that covered it
    result: str | None  # ran, caught_up: the run's outcome (succeeded, failed, ...)
    reason: str | None  # why it was skipped, coalesced or missed; a failed run's reason
    note: str | None  # what the schedule did to the time (a DST gap or fold)
    settled_at: str


class TaskSlots(TypedDict):
    task: str
    totals: dict[str, int]  # slots by outcome since start (every outcome, zeros too)
    last: list[SlotEntry]  # the last settled slots, oldest first


class ReloadCounts(TypedDict):
    added: int
    removed: int
    changed: int
    unchanged: int


class ReloadStatus(TypedDict):
    tasks_file: str | None
    watch: str  # inotify, signal, lost or none
    last_at: str | None
    last_source: str | None  # signal, file or request
    last_ok: bool | None
    last_changes: ReloadCounts | None
    last_error: str | None
    last_failed_at: str | None


class JournalFigures(TypedDict):
    bytes: int
    runs: int
    run_bytes_max: int
    history_runs_max: int
    history_bytes_max: int


class UnusableJob(TypedDict):
    job: str
    error: str


class DatabaseStatus(TypedDict):
    up: bool
    down_for_s: float | None
    listening: bool
    owner: str
    claiming: bool
    paused: bool
    enabled: bool
    held_runs: int
    unwritten_results: int
    claims_total: int
    lease_reclaims_total: int
    occurrences_missed_total: int  # passed over by this replica's claims (misfire = skip)
    occurrences_coalesced_total: int  # run as a later one by this replica's claims
    schedule_lag_s: float
    unusable_jobs: list[UnusableJob]


class SilentTask(TypedDict):
    """A task past its ``max_silence`` without a success."""

    task: str
    silent_for_s: float
    max_silence_s: float
    last_success_at: str | None  # RFC 3339; None: none since the daemon started


class NotifyKindFigures(TypedDict):
    sent: int
    failed: int  # given up, after its attempts


class NotifyFailure(TypedDict):
    task: str
    kind: str  # webhook, ping or command
    event: str
    error: str  # its kind and status: never a URL
    at: str  # RFC 3339


class NotifyStatus(TypedDict):
    """The notifications (``[notify]`` in the tasks file): no URL is ever shown."""

    tasks: int  # tasks with notifications
    capacity: int
    pending: int
    dropped: int  # dropped from a full queue, or at the end of a shutdown's time for them
    retries: int
    kinds: dict[str, NotifyKindFigures]
    last_failure: NotifyFailure | None
    silent: list[SilentTask]


class StateDirStatus(TypedDict):
    """The state directory (``RUNBROKER_STATE_DIR``) and its writes."""

    dir: str
    write_failures: int  # writes of its file that failed since the daemon started
    failing_since: str | None  # RFC 3339: its writes fail since then; None: the last one worked
    error: str | None  # why the last write failed, while they fail


class StatusAnswer(TypedDict):
    event: Literal["status"]
    ok: Literal[True]
    pid: int
    reaper: str  # pid1, subreaper or none
    uptime_s: float
    queue: QueueFigures
    current: CurrentRun | None
    waiting: list[WaitingRun]
    recent: list[RecentRun]
    ticks: list[TickSummary]
    slots: list[TaskSlots]
    reload: ReloadStatus
    journal: JournalFigures
    database: DatabaseStatus | None
    notify: NotRequired[NotifyStatus]  # only when a task has notifications, or had
    state: NotRequired[StateDirStatus]  # only with a state directory
    strays: NotRequired[list[StrayRun]]  # only while a handler given up on still runs


class HealthAnswer(TypedDict):
    event: Literal["health"]
    ok: bool
    reason: str
    code: NotRequired[str]  # ``unhealthy``, beside a reason
    ready: bool
    ready_reason: str
    warnings: NotRequired[list[str]]


class DstNote(TypedDict):
    """What an offset change did to a planned time (``daemon.schedules.dst``)."""

    kind: Literal["gap", "fold"]  # gap: ``wall`` did not exist; fold: it happened twice
    wall: str  # the wall time(s) the schedule names, ``02:30``
    note: str  # for people
    fold_pass: NotRequired[Literal["first", "second"]]  # fold: which pass this slot is


class PlannedSlot(TypedDict):
    at: str  # RFC 3339, UTC
    local: str  # RFC 3339 with the zone's offset: the task's wall clock
    dst: NotRequired[DstNote]


class TaskTimes(TypedDict):
    task: str
    schedule: str | None  # ``daily 02:30``, ``every 1h``; None: it runs only when triggered
    tz: str
    kind: Literal["schedule", "interval", "once", "trigger"]
    times: list[PlannedSlot]
    note: NotRequired[str]  # what the times are counted from, or why there are none


class NextAnswer(TypedDict):
    event: Literal["next"]
    ok: Literal[True]
    after: str  # RFC 3339, UTC: the times are the first ones after this instant
    source: Literal["daemon", "file"]
    count: int  # the times of each task: as asked, or fewer when many tasks are listed
    tasks: list[TaskTimes]


class ReloadMove(TypedDict):
    """How a task's next time moves with a reload (None: it does not tick)."""

    task: str
    change: Literal["added", "removed", "changed"]
    before: str | None
    after: str | None
    schedule_before: str | None
    schedule_after: str | None
