"""Prometheus metrics, served on ``/metrics`` when ``RUNBROKER_METRICS_ADDR`` is set.

What changes on every run is recorded when a run finishes, a slot's count when it is settled
(ticks only), and the rest is read from its owner at scrape time, so that no hot path pays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from daemon.core.runqueue import Run, RunQueue
from daemon.core.ticker.slots import OUTCOMES as SLOT_OUTCOMES
from daemon.core.ticker.slots import Slot
from daemon.core.ticker.ticker import TickPlan
from daemon.observe.notify_metrics import NotifyCollector
from daemon.observe.sources import NotifyRecord, RunnerFigures, StateRecord
from daemon.wire.reasons import REASON_CLOSED, REASON_FULL

# Every task's run series exist from start-up, at zero, for each of these: an alert on a first
# failure (``increase(...{outcome="failed"}[10m]) > 0``) needs the series before it. The triggers
# are runqueue.Trigger's (a test keeps them in step) but "once", which never runs in the daemon.
TRIGGERS = ("external", "tick", "schedule")
OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled")
FAILED_OUTCOMES = frozenset({"failed", "timed_out"})
RELOAD_OUTCOMES = ("succeeded", "refused")  # of a reload of the tasks file
DURATION_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, float("inf"))
# The Postgres runner's figures (``metrics_snapshot``), each as a series: zero when it has none.
DB_FIGURES: tuple[tuple[type[GaugeMetricFamily | CounterMetricFamily], str, str, str], ...] = (
    (
        GaugeMetricFamily,
        "runbroker_db_up",
        "1 when the database answers, 0 when not (or not configured).",
        "db_up",
    ),
    (
        CounterMetricFamily,
        "runbroker_claims",
        "Database job occurrences claimed by this replica.",
        "claims_total",
    ),
    (
        CounterMetricFamily,
        "runbroker_lease_reclaims",
        "Expired leases of dead replicas reclaimed by this replica.",
        "lease_reclaims_total",
    ),
    (
        CounterMetricFamily,
        "runbroker_occurrences_missed",
        "Database job occurrences this replica's claims passed over unrun (misfire = skip).",
        "occurrences_missed_total",
    ),
    (
        CounterMetricFamily,
        "runbroker_occurrences_coalesced",
        "Database job occurrences this replica's claims ran as a later one (misfire = coalesce).",
        "occurrences_coalesced_total",
    ),
    (
        GaugeMetricFamily,
        "runbroker_schedule_lag_seconds",
        "How late the last due database job started, in seconds.",
        "schedule_lag_seconds",
    ),
)


def outcome_of(run: Run) -> str:
    return "unknown" if run.result is None else run.result.outcome


def cadence_of(plan: TickPlan) -> float | None:
    """Seconds between ``plan``'s runs: its interval, or the gap after its next scheduled fire
    (None for a one-shot, or a schedule with no fire after the next)."""
    if plan.interval_s is not None and not plan.once:
        return plan.interval_s
    if plan.schedule is None or plan.next_fire_at is None:
        return None
    fire = datetime.fromtimestamp(plan.next_fire_at, UTC)
    after = plan.schedule.next_after(fire)
    return None if after is None else (after - fire).total_seconds()


class _LiveCollector(Collector):
    """Figures read from their owners at scrape time."""

    def __init__(
        self,
        queue: RunQueue,
        database: Callable[[], RunnerFigures | None],
        plans: Callable[[], Sequence[TickPlan]] = tuple,
    ) -> None:
        self.queue = queue
        self.database = database
        self.plans = plans

    def collect(self) -> Iterable[Metric]:
        stats = self.queue.statistics()
        yield GaugeMetricFamily(
            "runbroker_queue_depth", "Runs waiting in the queue.", value=stats.waiting
        )
        rejections = CounterMetricFamily(
            "runbroker_queue_rejections",
            "Submissions the run queue rejected, by reason.",
            labels=["reason"],
        )
        rejections.add_metric([REASON_FULL], stats.rejected_full)
        rejections.add_metric([REASON_CLOSED], stats.rejected_closed)
        yield rejections
        yield GaugeMetricFamily(
            "runbroker_runs_in_flight",
            "Runs executing now (0 or 1: one executor).",
            value=0 if self.queue.current is None else 1,
        )
        next_fire = GaugeMetricFamily(
            "runbroker_next_fire_timestamp_seconds",
            "Unix time of each ticking task's next planned run (its interval or schedule).",
            labels=["task"],
        )
        cadence = GaugeMetricFamily(
            "runbroker_task_cadence_seconds",
            "Each ticking task's expected time between runs: its interval, or for a schedule the"
            " gap from its next fire to the one after.",
            labels=["task"],
        )
        for plan in self.plans():
            if plan.next_fire_at is not None:
                next_fire.add_metric([plan.task], plan.next_fire_at)
            cadence_s = cadence_of(plan)
            if cadence_s is not None:
                cadence.add_metric([plan.task], cadence_s)
        yield next_fire
        yield cadence
        runner = self.database()
        figures = runner.metrics_snapshot() if runner is not None else {}
        yield GaugeMetricFamily(
            "runbroker_db_configured",
            "1 when a database is configured (RUNBROKER_DATABASE_URL), else 0.",
            value=0 if runner is None else 1,
        )
        for family, name, documentation, figure in DB_FIGURES:
            yield family(name, documentation, value=figures.get(figure, 0.0))


class _StateCollector(Collector):
    """The state directory's writes, read at scrape time."""

    def __init__(self, state: StateRecord | None) -> None:
        self.state = state

    def collect(self) -> Iterable[Metric]:
        status = None if self.state is None else self.state.status()
        yield CounterMetricFamily(
            "runbroker_state_write_failures",
            "Writes of the state directory's file that failed (a full disk, a lost volume).",
            value=0 if status is None else status["write_failures"],
        )
        yield GaugeMetricFamily(
            "runbroker_state_write_failing",
            "1 while the state directory's writes fail (the last one failed), else 0.",
            value=0 if status is None or status["failing_since"] is None else 1,
        )


class Metrics:
    def __init__(
        self,
        queue: RunQueue,
        database: Callable[[], RunnerFigures | None] = lambda: None,
        *,
        tasks: Iterable[str] = (),
        plans: Callable[[], Sequence[TickPlan]] = tuple,
        notify: NotifyRecord | None = None,
        state: StateRecord | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.runs = Counter(
            "runbroker_runs",
            "Finished runs by task, trigger and outcome.",
            ["task", "trigger", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "runbroker_run_duration_seconds",
            "Run durations by task.",
            ["task"],
            buckets=DURATION_BUCKETS_S,
            registry=self.registry,
        )
        self.last_success = Gauge(
            "runbroker_last_success_timestamp_seconds",
            "Unix time of each task's last successful run.",
            ["task"],
            registry=self.registry,
        )
        self.last_failure = Gauge(
            "runbroker_last_failure_timestamp_seconds",
            "Unix time of each task's last failed or timed-out run.",
            ["task"],
            registry=self.registry,
        )
        self.reloads = Counter(
            "runbroker_tasks_reloads",
            "Reloads of the tasks file, by outcome (refused: the old tasks still run).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in RELOAD_OUTCOMES:
            self.reloads.labels(outcome)
        self.reload_ok = Gauge(
            "runbroker_tasks_reload_last_success",
            "1 when the last reload of the tasks file succeeded (or none was tried), 0 when it"
            " was refused.",
            registry=self.registry,
        )
        self.reload_ok.set(1)
        self.slots = Counter(
            "runbroker_slots",
            "Scheduled slots of the ticking tasks, by task and outcome (ran, skipped, coalesced,"
            " missed, caught_up): each planned time counted once.",
            ["task", "outcome"],
            registry=self.registry,
        )
        self.registry.register(_LiveCollector(queue, database, plans))
        self.registry.register(NotifyCollector(notify))  # at zero without notifications
        self.registry.register(_StateCollector(state))  # at zero without a state directory
        # process_start_time_seconds (the alerts' "since start"), CPU, memory, descriptors.
        ProcessCollector(registry=self.registry)
        self.add_tasks(tasks)

    def add_tasks(self, tasks: Iterable[str]) -> None:
        """Each task's run series at zero (0 = never, for the timestamps): from start-up, and
        for the tasks a reload adds. A task a reload removes keeps the series it had."""
        for task in tasks:
            for trigger in TRIGGERS:
                for outcome in OUTCOMES:
                    self.runs.labels(task, trigger, outcome)
            self.duration.labels(task)
            self.last_success.labels(task)
            self.last_failure.labels(task)
            for outcome in SLOT_OUTCOMES:
                self.slots.labels(task, outcome)

    def run_finished(self, run: Run) -> None:
        outcome = outcome_of(run)
        task = run.request.task
        self.runs.labels(task, run.request.trigger, outcome).inc()
        if run.result is not None and run.started_at is not None:
            self.duration.labels(task).observe(run.result.duration_ms / 1000)
        if outcome == "succeeded":
            self.last_success.labels(task).set(time.time())
        elif outcome in FAILED_OUTCOMES:
            self.last_failure.labels(task).set(time.time())

    def slot_settled(self, slot: Slot) -> None:
        """A slot record's listener: one more slot (``count`` more) of its outcome."""
        self.slots.labels(slot.task, slot.outcome).inc(slot.count)

    def reload_done(self, ok: bool) -> None:
        self.reloads.labels("succeeded" if ok else "refused").inc()
        self.reload_ok.set(1 if ok else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
