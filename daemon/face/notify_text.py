"""The notifications in ``runbroker status``: what was sent, given up and dropped, what
waits, and each task past its ``max_silence``. No URL is ever in the answer to show."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def notify_lines(
    notify: Mapping[str, Any],
    human_time: Callable[[str | None], str],
    human_duration: Callable[[float], str],
) -> list[str]:
    """The lines of ``status``'s ``notify`` object; the times in ``status_text``'s words."""
    kinds = notify.get("kinds") or {}
    sent = ", ".join(
        f"{kind} {figures.get('sent', 0)} sent"
        + (f" / {figures['failed']} FAILED" if figures.get("failed") else "")
        for kind, figures in kinds.items()
    )
    lines = [
        f"notify: {notify.get('tasks', 0)} tasks; {sent}; pending {notify.get('pending', 0)}"
        f" ({notify.get('capacity', '?')} a target), dropped {notify.get('dropped', 0)},"
        f" retries {notify.get('retries', 0)}"
    ]
    failure = notify.get("last_failure")
    if failure:
        lines.append(
            f"  last failure: {failure.get('kind', '?')} of task {failure.get('task', '?')!r}"
            f" ({failure.get('event', '?')}) {human_time(failure.get('at'))}:"
            f" {failure.get('error', '')}"
        )
    for item in notify.get("silent") or []:
        last = item.get("last_success_at")
        since = f"last success {human_time(last)}" if last else "no success since start"
        lines.append(
            f"  SILENT: task {item.get('task', '?')!r} for"
            f" {human_duration(float(item.get('silent_for_s') or 0))} (max_silence"
            f" {human_duration(float(item.get('max_silence_s') or 0))}; {since})"
        )
    return lines
