"""Between the core's runs and the job store's records: what a claimed job asks the core to
run, and what a run's result writes back (through the planner: a retry, or the next
occurrence)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from daemon.core.runqueue import Run, RunRequest, RunResult, is_json_output
from daemon.log.logs import get_logger
from daemon.pg.health import LOGGER_NAME
from daemon.pg.plan import plan_finish
from daemon.pg.store.base import Claimed, Finish
from daemon.pg.store.jsonb_safe import jsonb_safe, text_safe
from daemon.settings import Settings

log = get_logger(LOGGER_NAME)


def run_request(claimed: Claimed) -> RunRequest:
    """What the core is asked to run for a claimed job: the one place that builds it."""
    return RunRequest(
        task=claimed.job.task,
        trigger="schedule",
        payload=claimed.job.payload,
        job=claimed.job.name,
        attempt=claimed.attempt,
        scheduled_for=claimed.scheduled_for,
    )


def utc_from_epoch(epoch_s: float | None) -> datetime | None:
    return None if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC)


def finish_record(
    claimed: Claimed, run: Run | None, result: RunResult, settings: Settings, *, retryable: bool
) -> Finish:
    """The record of a held run's end (``run`` None: it never reached the queue). An output
    that the rule of a run's output refuses (``is_json_output``: NaN, an infinity) is dropped
    with a warning: the run's result is still recorded. A NUL or a lone surrogate, which the
    database cannot store, is replaced (``store.jsonb_safe``), so that one record can never fail
    the batch it is written in."""
    started_at = utc_from_epoch(run.started_at if run is not None else None)
    output = None if result.output is None else _storable(claimed, result.output)
    return plan_finish(
        claimed,
        ok=result.ok,
        cancelled=result.cancelled,
        error=text_safe(result.reason) if result.reason else result.reason,
        output=output,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        default_max_attempts=settings.retry_attempts,
        backoff_base_s=settings.retry_backoff_s,
        retryable=retryable,
    )


def _storable(claimed: Claimed, output: dict[str, Any]) -> dict[str, Any] | None:
    """``output`` as the database stores it, or None (dropped, with a warning) when it is not
    JSON by the rule of a run's output."""
    if is_json_output(output):
        try:
            return jsonb_safe(output)  # type: ignore[no-any-return]
        except (TypeError, ValueError):
            pass
    log.warning("job.output_dropped", job=claimed.job.name, reason="not JSON")
    return None
