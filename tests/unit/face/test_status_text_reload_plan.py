"""How ``reload --dry-run`` shows a reload's plan (daemon/face/status_text.py)."""

from __future__ import annotations

from daemon.face.status_text import reload_plan_lines


def test_the_plan_names_each_change_and_its_next_times() -> None:
    answer = {
        "event": "reload",
        "ok": True,
        "dry_run": True,
        "added": ["fresh"],
        "removed": [],
        "changed": ["edit", "words"],
        "unchanged": ["keep"],
        "moves": [
            {
                "task": "fresh",
                "change": "added",
                "before": None,
                "after": "2026-03-28T13:00:00Z",
                "schedule_before": None,
                "schedule_after": "every 1h",
            },
            {
                "task": "edit",
                "change": "changed",
                "before": "2026-03-29T04:00:00Z",
                "after": "2026-03-29T06:00:00Z",
                "schedule_before": "daily 04:00 (UTC)",
                "schedule_after": "daily 06:00 (UTC)",
            },
            {
                "task": "words",
                "change": "changed",
                "before": "2026-03-29T05:00:00Z",
                "after": "2026-03-29T05:00:00Z",
                "schedule_before": "daily 05:00 (UTC)",
                "schedule_after": "daily 05:00 (UTC)",
            },
        ],
    }
    assert reload_plan_lines(answer) == [
        "dry run, nothing changed; a reload would make: 1 added (fresh), 0 removed, "
        "2 changed (edit, words), 1 unchanged",
        "  fresh (added): next none -> 2026-03-28T13:00:00Z; schedule none -> every 1h",
        "  edit (changed): next 2026-03-29T04:00:00Z -> 2026-03-29T06:00:00Z; "
        "schedule daily 04:00 (UTC) -> daily 06:00 (UTC)",
        "  words (changed): next 2026-03-29T05:00:00Z -> 2026-03-29T05:00:00Z; "
        "schedule daily 05:00 (UTC)",
    ]
