"""``runbroker status`` for people: the JSON answer rendered as a short report."""

from __future__ import annotations

from typing import Any


def _result_line(item: dict[str, Any]) -> str:
    mark = "ok  " if item.get("ok") else "FAIL"
    duration = item.get("duration_ms") or 0
    reason = f"  {item['reason']}" if item.get("reason") else ""
    return (
        f"  {mark} {item.get('id', '?'):<24} {item.get('task', '?'):<16} {duration:>8} ms{reason}"
    )


def render_status(answer: dict[str, Any]) -> str:
    queue = answer.get("queue", {})
    lines = [
        f"runbroker pid {answer.get('pid', '?')}, up {answer.get('uptime_s', 0):.0f}s",
        f"queue: {queue.get('waiting', 0)}/{queue.get('capacity', 0)} waiting, "
        f"{queue.get('accepted', 0)} accepted, {queue.get('finished', 0)} finished, "
        f"{queue.get('rejected_full', 0)} rejected (full)",
    ]
    current = answer.get("current")
    if current:
        lines.append(
            f"running: {current['id']} {current['task']} ({current['trigger']}), "
            f"{current['elapsed_ms'] / 1000:.1f}s"
        )
    else:
        lines.append("running: nothing")
    for item in answer.get("waiting", []):
        lines.append(f"  #{item['position']} {item['id']} {item['task']} ({item['trigger']})")
    ticks = answer.get("ticks", [])
    if ticks:
        lines.append("ticks:")
        for tick in ticks:
            lines.append(f"  {tick['task']:<16} next {tick.get('next_at') or '-'}")
    recent = answer.get("recent", [])
    if recent:
        lines.append("recent:")
        lines.extend(_result_line(item) for item in recent)
    database = answer.get("database")
    if database is not None:
        lines.append(f"database: {database}")
    return "\n".join(lines)
