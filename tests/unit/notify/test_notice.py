"""A notice's bounds and the webhook's document: the output tail never grows past its bounds
whatever the run printed, a ping's URL keeps its query, and docs/notifications.md shows the
document's every field."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.journal import RunLog
from daemon.core.runqueue import Run, RunRequest, RunResult
from daemon.core.tasks.notify_targets import TaskNotify
from daemon.notify.http_send import ping_url
from daemon.notify.notice import (
    TAIL_BYTES,
    TAIL_LINE_CHARS,
    TAIL_LINES,
    document,
    output_tail,
    run_notice,
)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "notifications.md"


def _log_of(lines: list[str], bytes_max: int = 1 << 20) -> RunLog:
    log = RunLog(Run(RunRequest(task="t")), bytes_max)
    for line in lines:
        log.add("stdout", line)
    return log


@given(st.lists(st.text(max_size=3000), max_size=60))
def test_the_tail_is_the_last_lines_within_every_bound(lines: list[str]) -> None:
    log = _log_of(lines)
    tail, before = output_tail(log)
    assert len(tail) <= TAIL_LINES
    assert all(len(line) <= TAIL_LINE_CHARS for line in tail)
    assert sum(len(line.encode("utf-8", "replace")) + 1 for line in tail) <= TAIL_BYTES
    assert before + len(tail) == len(lines)  # the tail is the end: what is before is counted
    assert list(tail) == [line[:TAIL_LINE_CHARS] for line in lines[before:]]


def test_a_run_that_printed_a_lot_is_told_in_a_few_lines() -> None:
    lines = [f"line {n}" for n in range(100_000)]
    tail, before = output_tail(_log_of(lines, bytes_max=1 << 16))
    assert tail[-1] == "line 99999"
    assert len(tail) == TAIL_LINES
    assert before == 100_000 - TAIL_LINES


@given(st.sampled_from(["start", "success", "failure"]), st.text(alphabet="abc=&", max_size=10))
def test_a_ping_url_keeps_its_query_at_the_end(event: str, query: str) -> None:
    base = "https://hc.example/ping/uuid"
    url = ping_url(f"{base}/?{query}" if query else base, event)
    suffix = {"start": "/start", "success": "", "failure": "/fail"}[event]
    assert url == f"{base}{suffix}" + (f"?{query}" if query else "")


def test_the_notifications_page_shows_every_field_of_the_document() -> None:
    run = Run(RunRequest(task="backup"))
    run.mark_started()
    run.finish(RunResult(ok=False, reason="exit code 4", exit_code=4, duration_ms=812))
    fields = document(run_notice(run, ("failure",), TaskNotify(), None), "failure")
    blocks = re.findall(r"```json\n(.*?)```", PAGE.read_text(), re.S)
    shown = [json.loads(block) for block in blocks if "runbroker.notification/1" in block]
    assert len(shown) == 1, "the page shows the document once"
    assert list(shown[0]) == list(fields)
