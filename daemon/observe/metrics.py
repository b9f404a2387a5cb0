"""Prometheus metrics, served on ``/metrics`` when ``RUNBROKER_METRICS_ADDR`` is set.

Run counters and durations are recorded when a run finishes; queue depth, rejections and the
database runner's figures are read from their owners at scrape time, so no hot path pays for
them. The HTTP endpoint is a small asyncio server owned by the broker (no thread), answering
``GET /metrics`` and ``GET /healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from daemon.core.runqueue import REASON_CLOSED, REASON_FULL, Run, RunQueue
from daemon.core.ticker import TickPlan
from daemon.observe.logs import get_logger

log = get_logger("runbroker.metrics")

# Every task's run series exist from start-up, at zero, for each of these: an alert on a first
# failure (``increase(...{outcome="failed"}[10m]) > 0``) needs the series before it.
TRIGGERS = ("external", "tick", "schedule")
OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled")
FAILED_OUTCOMES = frozenset({"failed", "timed_out"})
DURATION_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, float("inf"))
MAX_HTTP_REQUEST_BYTES = 8192
HTTP_DEADLINE_S = 10.0


class DatabaseFigures(Protocol):
    """What the Postgres runner exposes for scraping."""

    def metrics_snapshot(self) -> dict[str, float]: ...


def outcome_of(run: Run) -> str:
    result = run.result
    if result is None:
        return "unknown"
    if result.ok:
        return "succeeded"
    if result.cancelled:
        return "cancelled"
    if result.timed_out:
        return "timed_out"
    return "failed"


class _LiveCollector(Collector):
    """Figures read from their owners at scrape time."""

    def __init__(
        self,
        queue: RunQueue,
        database: Callable[[], DatabaseFigures | None],
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
        for plan in self.plans():
            if plan.next_fire_at is not None:
                next_fire.add_metric([plan.task], plan.next_fire_at)
        yield next_fire
        runner = self.database()
        figures = runner.metrics_snapshot() if runner is not None else {}
        yield GaugeMetricFamily(
            "runbroker_db_up",
            "1 when the database answers, 0 when not (or not configured).",
            value=figures.get("db_up", 0.0),
        )
        yield CounterMetricFamily(
            "runbroker_claims",
            "Database job occurrences claimed by this replica.",
            value=figures.get("claims_total", 0.0),
        )
        yield CounterMetricFamily(
            "runbroker_lease_reclaims",
            "Expired leases of dead replicas reclaimed by this replica.",
            value=figures.get("lease_reclaims_total", 0.0),
        )
        yield GaugeMetricFamily(
            "runbroker_schedule_lag_seconds",
            "How late the last due database job started, in seconds.",
            value=figures.get("schedule_lag_seconds", 0.0),
        )


class Metrics:
    def __init__(
        self,
        queue: RunQueue,
        database: Callable[[], DatabaseFigures | None] = lambda: None,
        *,
        tasks: Iterable[str] = (),
        plans: Callable[[], Sequence[TickPlan]] = tuple,
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
        self.registry.register(_LiveCollector(queue, database, plans))
        for task in tasks:  # at zero from the start (0 = never, for the timestamps)
            for trigger in TRIGGERS:
                for outcome in OUTCOMES:
                    self.runs.labels(task, trigger, outcome)
            self.duration.labels(task)
            self.last_success.labels(task)
            self.last_failure.labels(task)

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

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """A minimal HTTP/1.0 endpoint for Prometheus scrapes."""

    def __init__(self, metrics: Metrics, addr: str, healthy: Callable[[], str | None]) -> None:
        host, _, port = addr.rpartition(":")
        self.host = host.strip("[]") or "0.0.0.0"
        self.port = int(port)
        self.metrics = metrics
        self.healthy = healthy
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("metrics.listening", host=self.host, port=self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HTTP_DEADLINE_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, content_type, body = self._answer(head)
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.LimitOverrunError:
            writer.write(b"HTTP/1.0 431 Request Header Fields Too Large\r\n\r\n")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        path = parts[1].split("?", 1)[0]
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, self.metrics.exposition()
        if path == "/healthz":
            problem = self.healthy()
            if problem is None:
                return "200 OK", "text/plain", b"healthy\n"
            return "503 Service Unavailable", "text/plain", f"unhealthy: {problem}\n".encode()
        return "404 Not Found", "text/plain", b"not found\n"
