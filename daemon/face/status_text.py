"""``runbroker status`` for people: the JSON answer as a short report of aligned tables.

Fields this version does not know (a newer daemon's) are shown as they are rather than
dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from daemon.core.subreaper import MODE_TEXT
from daemon.face.notify_text import notify_lines

# The fields of the runner's answer (PgRunner.status, the source: a test keeps them in step) that
# _database_lines renders. Any other is shown as it is.
_DATABASE_KNOWN = frozenset(
    {
        "up",
        "down_for_s",
        "listening",
        "owner",
        "claiming",
        "paused",
        "enabled",
        "held_runs",
        "unwritten_results",
        "claims_total",
        "lease_reclaims_total",
        "occurrences_missed_total",
        "occurrences_coalesced_total",
        "schedule_lag_s",
        "unusable_jobs",
    }
)


def human_duration(seconds: float) -> str:
    """``12ms``, ``4.2s``, ``3m05s``, ``2h03m``, ``4d07h``: two units at most."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def human_time(iso: str | None, now: float) -> str:
    """An RFC 3339 time as ``14:27:03Z (2s ago)``, with the date when it is not today (UTC)."""
    if not iso:
        return "-"
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    at = at.astimezone(UTC)
    today = datetime.fromtimestamp(now, UTC).date()
    shown = f"{at:%H:%M:%SZ}" if at.date() == today else f"{at:%Y-%m-%d %H:%M:%SZ}"
    delta = at.timestamp() - now
    if delta >= 0:
        return f"{shown} (in {human_duration(delta)})"
    return f"{shown} ({human_duration(-delta)} ago)"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, indented by two, the last column not padded."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append(("  " + "  ".join([*cells, row[-1]])).rstrip())
    return lines


def _schedule(tick: dict[str, Any]) -> str:
    schedule = str(tick.get("schedule") or "-")
    tz = tick.get("tz")
    return f"{schedule} ({tz})" if tz and tz != "UTC" else schedule


def _queue_line(queue: dict[str, Any]) -> str:
    rejected = (
        f"{queue.get('rejected_full', 0)} rejected (full), "
        f"{queue.get('rejected_closed', 0)} rejected (shutting down)"
    )
    closed = ", closed" if queue.get("closed") else ""
    return (
        f"queue: {queue.get('waiting', 0)} of {queue.get('capacity', 0)} waiting; "
        f"{queue.get('accepted', 0)} accepted, {queue.get('finished', 0)} finished, "
        f"{rejected}{closed}"
    )


def _database_lines(database: dict[str, Any]) -> list[str]:
    if database.get("up"):
        state = ["up", "listening" if database.get("listening") else "polling (no LISTEN)"]
    else:
        down_for = database.get("down_for_s")
        state = ["DOWN" + (f" for {human_duration(down_for)}" if down_for is not None else "")]
    if database.get("enabled") is False:
        state.append("disabled (scheduler.enabled)")
    if database.get("paused"):
        state.append("paused (scheduler.paused)")
    # Claiming needs the database: while it is down nothing is claimed, whatever the flag says.
    claiming = database.get("claiming") and database.get("up")
    state.append("claiming" if claiming else "not claiming")
    lines = [f"database: {', '.join(state)}; replica {database.get('owner', '?')}"]
    lag = database.get("schedule_lag_s")
    lines.append(
        f"  claims {database.get('claims_total', 0)}, "
        f"lease reclaims {database.get('lease_reclaims_total', 0)}, "
        f"held runs {database.get('held_runs', 0)}, "
        f"unwritten results {database.get('unwritten_results', 0)}, "
        f"schedule lag {human_duration(lag) if isinstance(lag, int | float) else '-'}"
    )
    missed = database.get("occurrences_missed_total") or 0
    coalesced = database.get("occurrences_coalesced_total") or 0
    if missed or coalesced:  # a replica that was down, or claims that fell behind
        lines.append(f"  occurrences passed over: {missed} missed, {coalesced} coalesced")
    for job in database.get("unusable_jobs") or []:
        name, error = (job.get("job"), job.get("error")) if isinstance(job, dict) else (job, "")
        lines.append(f"  job {name} cannot run: {error}")
    extra = {key: value for key, value in database.items() if key not in _DATABASE_KNOWN}
    lines.extend(f"  {key}: {_as_text(value)}" for key, value in sorted(extra.items()))
    return lines


def _as_text(value: object) -> str:
    """A field this version does not know, as it came on the wire (JSON), not a Python repr."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def reload_summary(changes: dict[str, Any]) -> str:
    """``1 added (report), 0 removed, 1 changed (nightly), 3 unchanged``: the fields are lists of
    names (a reload's answer) or counts (``status``'s last reload)."""
    parts = []
    for key in ("added", "removed", "changed", "unchanged"):
        value = changes.get(key) or 0
        if isinstance(value, list):
            names = f" ({', '.join(value)})" if value and key != "unchanged" else ""
            parts.append(f"{len(value)} {key}{names}")
        else:
            parts.append(f"{value} {key}")
    return ", ".join(parts)


def reload_plan_lines(answer: dict[str, Any]) -> list[str]:
    """``reload --dry-run``: what a reload would change, and how each task's next time moves."""
    lines = [f"dry run, nothing changed; a reload would make: {reload_summary(answer)}"]
    for move in answer.get("moves", []):
        before, after = move.get("schedule_before"), move.get("schedule_after")
        timing = f"{before or 'none'} -> {after or 'none'}" if before != after else before
        lines.append(
            f"  {move['task']} ({move['change']}): next {move.get('before') or 'none'} -> "
            f"{move.get('after') or 'none'}" + (f"; schedule {timing}" if timing else "")
        )
    return lines


def _reload_lines(reload: dict[str, Any], now: float) -> list[str]:
    if not reload.get("tasks_file"):
        return ["tasks file: none (nothing to reload)"]
    watch = {
        "inotify": "watched",
        "signal": "not watched: SIGHUP or `runbroker reload`",
        "lost": "watch LOST: SIGHUP or `runbroker reload` re-arms it",
    }
    head = f"tasks file: {reload['tasks_file']} ({watch.get(str(reload.get('watch')), '?')})"
    if reload.get("last_ok") is None:
        return [head, "  not reloaded since start"]
    last = f"  last reload {human_time(reload.get('last_at'), now)} ({reload.get('last_source')})"
    if not reload.get("last_ok"):
        return [head, f"{last}: FAILED, the old tasks still run: {reload.get('last_error')}"]
    lines = [head, f"{last}: ok, {reload_summary(reload.get('last_changes') or {})}"]
    if reload.get("last_failed_at"):
        failed_at = human_time(reload.get("last_failed_at"), now)
        lines.append(f"  last failed reload {failed_at}: {reload.get('last_error')}")
    return lines


SLOTS_SHOWN = 5  # of each task's last slots (``--json`` has all the daemon keeps)
_OUTCOME_WORDS = {"caught_up": "caught up"}


def _slot_lines(slots: list[dict[str, Any]], now: float) -> list[str]:
    """Each task's last slots (what became of each planned time) and its counts."""
    lines = [f"slots (the last {SLOTS_SHOWN} of each task):"]
    rows = []
    totals = []
    for task_slots in slots:
        task = str(task_slots.get("task", "?"))
        for entry in (task_slots.get("last") or [])[-SLOTS_SHOWN:]:
            outcome = str(entry.get("outcome", "?"))
            count = entry.get("count") or 1
            shown = _OUTCOME_WORDS.get(outcome, outcome) + (f" x{count}" if count > 1 else "")
            detail = [str(entry.get(key)) for key in ("result", "reason", "note") if entry.get(key)]
            rows.append(
                [
                    task,
                    human_time(entry.get("planned_at"), now),
                    shown.upper() if outcome == "missed" else shown,
                    str(entry.get("run_id") or "-"),
                    "; ".join(detail),
                ]
            )
        counted = task_slots.get("totals") or {}
        said = ", ".join(
            f"{number} {_OUTCOME_WORDS.get(outcome, outcome)}"
            for outcome, number in counted.items()
        )
        totals.append(f"  {task}: {said}")
    lines.extend(_table(["TASK", "PLANNED", "OUTCOME", "RUN", "DETAIL"], rows))
    return lines + totals


def render_status(answer: Mapping[str, Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    uptime_s = float(answer.get("uptime_s") or 0)
    started = datetime.fromtimestamp(now - uptime_s, UTC)
    reaper = MODE_TEXT.get(str(answer.get("reaper")))  # an older daemon does not say
    lines = [
        f"runbroker: pid {answer.get('pid', '?')}, up {human_duration(uptime_s)} "
        f"(since {started:%Y-%m-%d %H:%M:%SZ})" + (f", {reaper}" if reaper else ""),
        _queue_line(answer.get("queue") or {}),
    ]
    current = answer.get("current")
    if current:
        lines.append(
            f"running: {current.get('id', '?')} {current.get('task', '?')} "
            f"({current.get('trigger', '?')}) for "
            f"{human_duration((current.get('elapsed_ms') or 0) / 1000)}"
        )
    else:
        lines.append("running: nothing")
    for stray in answer.get("strays") or []:  # only while a handler given up on still runs
        lines.append(
            f"stray: {stray.get('id', '?')} {stray.get('task', '?')}, given up on "
            f"{human_time(stray.get('given_up_at'), now)}: its handler ignored its cancellation"
        )
    journal = answer.get("journal")  # an older daemon does not say
    if journal:
        mib = {key: (journal.get(key) or 0) / 1024**2 for key in journal if "bytes" in key}
        lines.append(
            f"output kept: {mib['bytes']:.1f} MiB of {journal.get('runs', 0)} runs (at most "
            f"{mib['run_bytes_max']:g} MiB a run, {mib['history_bytes_max']:g} MiB for the last "
            f"{journal.get('history_runs_max', 0)} finished)"
        )
    waiting = answer.get("waiting") or []
    if waiting:
        lines.append("waiting:")
        rows = [
            [str(item.get(key, "?")) for key in ("position", "id", "task", "trigger")]
            for item in waiting
        ]
        lines.extend(_table(["#", "ID", "TASK", "TRIGGER"], rows))
    ticks = answer.get("ticks") or []
    if ticks:
        lines.append("ticks:")
        rows = [
            [
                str(tick.get("task", "?")),
                _schedule(tick),
                human_time(tick.get("next_at"), now),
                human_time(tick.get("last_at"), now),
            ]
            for tick in ticks
        ]
        lines.extend(_table(["TASK", "SCHEDULE", "NEXT", "LAST"], rows))
    slots = answer.get("slots")  # an older daemon does not say
    if slots:
        lines.extend(_slot_lines(slots, now))
    recent = answer.get("recent") or []
    if recent:
        lines.append("recent:")
        rows = []
        for item in recent:
            duration_ms = item.get("duration_ms") or 0
            rows.append(
                [
                    human_time(item.get("finished_at"), now),
                    "ok" if item.get("ok") else "FAILED",
                    str(item.get("id", "?")),
                    str(item.get("task", "?")),
                    str(item.get("trigger", "?")),
                    human_duration(duration_ms / 1000) if duration_ms else "-",
                    str(item.get("reason") or ""),
                ]
            )
        headers = ["FINISHED", "RESULT", "ID", "TASK", "TRIGGER", "DURATION", "REASON"]
        lines.extend(_table(headers, rows))
    reload = answer.get("reload")
    if reload is not None:
        lines.extend(_reload_lines(reload, now))
    database = answer.get("database")
    if database is not None:
        lines.extend(_database_lines(database))
    notify = answer.get("notify")  # only when a task has notifications
    if notify:
        lines.extend(notify_lines(notify, lambda iso: human_time(iso, now), human_duration))
    state = answer.get("state")  # only with a state directory
    if state:
        lines.append(_state_line(state, now))
    return "\n".join(lines)


def _state_line(state: dict[str, Any], now: float) -> str:
    head = f"state dir: {state.get('dir', '?')}"
    failures = state.get("write_failures") or 0
    if state.get("failing_since") is None:
        return f"{head}: ok" + (f" ({failures} failed writes since start)" if failures else "")
    since = human_time(state.get("failing_since"), now)
    return (
        f"{head}: WRITES FAILING since {since} ({state.get('error')}; {failures} failed writes):"
        " slots planned since are not kept for the next start"
    )
