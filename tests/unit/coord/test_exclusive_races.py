"""Cross-process run coalescing under races between real processes: a killed holder, a request
or a requester racing the holder's release and exit, and a hammer of contenders that never
overlap and never strand demand."""

from __future__ import annotations

import bisect
import collections
import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.coord.exclusive import LOCK_NAME, Exclusive
from daemon.coord.guard import OverlapGuard
from daemon.coord.outcome import ExclusiveResult, Outcome
from tests.unit.coord.conftest import (
    LogLines,
    always_open,
    decisions_in,
    log_lines,
    read_line,
    spawn_worker,
)


def test_exclusive_killed_holder_frees_lock_and_orphan_is_cleared(
    tmp_path: Path,
    held_worker: Callable[..., subprocess.Popen[str]],
    logs: LogLines,
) -> None:
    proc = held_worker("hold-exclusive", str(tmp_path))
    assert read_line(proc) == "running"
    exclusive = Exclusive(tmp_path)
    runs: list[str] = []

    def job() -> bool:
        runs.append("x")
        return True

    assert exclusive.run(job).outcome is Outcome.QUEUED
    assert exclusive.run(job).outcome is Outcome.DISCARDED
    assert exclusive.run_or_skip(job).outcome is Outcome.SKIPPED
    assert runs == []
    assert exclusive.pending() == 1
    holder = exclusive.holder()
    assert holder.held is True
    assert holder.held_for_s is not None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert exclusive.holder().held is False
    assert exclusive.pending() == 1  # orphaned: its holder died
    assert exclusive.run(job) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert runs == ["x"]
    assert exclusive.pending() == 0
    assert ("coord.orphan-cleared", str(tmp_path), 1) in log_lines(logs, "cleared")


def test_exclusive_request_racing_the_holders_release_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: LogLines
) -> None:
    """A request recorded after the holder's last empty check, before it releases."""
    exclusive = Exclusive(tmp_path)
    real_release = OverlapGuard.release
    injected: list[Outcome] = []

    def release(guard: OverlapGuard) -> None:
        if guard.held and not injected:
            injected.append(Exclusive(tmp_path).run(always_open).outcome)
        real_release(guard)

    monkeypatch.setattr(OverlapGuard, "release", release)
    result = exclusive.run(always_open)
    assert injected == [Outcome.QUEUED]
    assert result == ExclusiveResult(Outcome.RAN_QUEUED, runs=2, last_ok=True)
    assert exclusive.pending() == 0
    assert "handoff" in decisions_in(logs)


def test_exclusive_requester_racing_the_holders_exit_runs_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: LogLines
) -> None:
    """The holder leaves between a caller's failed probe and its record: the caller serves it."""
    holder = OverlapGuard(tmp_path / LOCK_NAME)
    assert holder.try_acquire()
    exclusive = Exclusive(tmp_path)
    real_enqueue = exclusive._enqueue

    def enqueue() -> int:
        seen = real_enqueue()
        holder.release()  # the holder retires without seeing the request
        return seen

    monkeypatch.setattr(exclusive, "_enqueue", enqueue)
    assert exclusive.run(always_open) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert exclusive.pending() == 0
    decisions = decisions_in(logs)
    assert "reprobe" in decisions
    assert "orphan-cleared" not in decisions  # its own request, not an orphan


def test_exclusive_hammer_never_overlaps_and_never_strands_demand(tmp_path: Path) -> None:
    """8 processes x 25 runs, capacity 2, all released together in each of 25 rounds.

    After every round all 8 calls have returned, so no holder is left: any request still
    queued would be lost demand (a round has at most 7 requests, below the rerun cap).
    """
    workers, rounds = 8, 25
    procs = [spawn_worker("hammer", str(tmp_path), "2") for _ in range(workers)]
    exclusive = Exclusive(tmp_path)
    reports: list[dict[str, Any]] = []
    try:
        for proc in procs:
            assert read_line(proc) == "ready"
        for round_no in range(rounds):
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            round_reports = [json.loads(read_line(proc)) for proc in procs]
            assert exclusive.pending() == 0, f"round {round_no} stranded demand"
            assert exclusive.holder().held is False
            reports.extend(round_reports)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    assert [r["overlaps"] for r in reports] == [[]] * (workers * rounds)
    outcomes = collections.Counter(r["outcome"] for r in reports)
    assert set(outcomes) <= {"ran", "ran-queued", "queued", "discarded"}
    assert outcomes["queued"] + outcomes["discarded"] > 0, "no contention: nothing hammered"
    run_starts = sorted(start for r in reports for start in r["run_starts_ns"])
    assert sum(r["runs"] for r in reports) == len(run_starts)
    # Every queued or discarded request is covered by a run that started after it was made.
    for r in reports:
        if r["outcome"] in {"queued", "discarded"}:
            assert bisect.bisect_right(run_starts, r["called_at_ns"]) < len(run_starts)
    assert not (tmp_path / "running.marker").exists()
