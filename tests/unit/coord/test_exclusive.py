"""Cross-process run coalescing (daemon/coord/exclusive.py): a free lock runs, a busy one queues
then discards, reruns within their capacity and cap, skip mode, the gate, and bad settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.coord.exclusive import LOCK_NAME, QUEUE_NAME, Exclusive
from daemon.coord.guard import OverlapGuard
from daemon.coord.outcome import ExclusiveResult, Outcome
from daemon.coord.slot import SlotFile
from tests.unit.coord.conftest import WORKER, LogLines, always_open, decisions_in, log_lines


def test_exclusive_runs_when_free_and_reports_the_run(tmp_path: Path, logs: LogLines) -> None:
    directory = tmp_path / "locks"  # created on first use
    exclusive = Exclusive(directory)
    seen_holder: list[bool | None] = []

    def job() -> bool:
        seen_holder.append(exclusive.holder().held)
        return True

    assert exclusive.run(job) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert seen_holder == [True]
    assert exclusive.holder().held is False
    assert {p.name for p in directory.iterdir()} == {LOCK_NAME, QUEUE_NAME}
    assert exclusive.run(lambda: False) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=False)
    assert log_lines(logs, "runs", "last_ok")[-1] == ("coord.ran", str(directory), 1, False)


def test_exclusive_raising_job_is_a_failed_run(tmp_path: Path, logs: LogLines) -> None:
    def job() -> bool:
        raise RuntimeError("secret-payload")

    result = Exclusive(tmp_path).run(job)
    assert result.outcome is Outcome.RAN
    assert result.last_ok is False
    assert isinstance(result.last_error, RuntimeError)
    assert "run-failed" in decisions_in(logs)
    assert all("secret-payload" not in repr(line) for line in logs)
    assert OverlapGuard(tmp_path / LOCK_NAME).try_acquire()  # released


def test_exclusive_busy_lock_queues_then_discards(tmp_path: Path, logs: LogLines) -> None:
    exclusive = Exclusive(tmp_path)
    other = Exclusive(tmp_path)  # another caller; flock treats its descriptor as a rival
    inner: list[ExclusiveResult] = []
    runs = 0

    def job() -> bool:
        nonlocal runs
        runs += 1
        if runs == 1:
            inner.append(other.run(always_open))
            inner.append(other.run(always_open))
            assert other.pending() == 1
        return True

    result = exclusive.run(job)
    assert [r.outcome for r in inner] == [Outcome.QUEUED, Outcome.DISCARDED]
    assert [r.runs for r in inner] == [0, 0]
    assert result == ExclusiveResult(Outcome.RAN_QUEUED, runs=2, last_ok=True)
    assert exclusive.pending() == 0
    assert ("coord.queued", str(tmp_path), 1) in log_lines(logs, "pending")
    assert ("coord.discarded", str(tmp_path), 1) in log_lines(logs, "pending")
    assert "rerun" in decisions_in(logs)


def test_exclusive_capacity_two_gives_two_reruns(tmp_path: Path) -> None:
    exclusive = Exclusive(tmp_path, queue_capacity=2)
    assert exclusive.queue_capacity == 2
    inner: list[Outcome] = []

    def job() -> bool:
        if not inner:
            inner.extend(
                Exclusive(tmp_path, queue_capacity=2).run(always_open).outcome for _ in range(3)
            )
        return True

    result = exclusive.run(job)
    assert inner == [Outcome.QUEUED, Outcome.QUEUED, Outcome.DISCARDED]
    assert result.runs == 3
    assert exclusive.pending() == 0


def test_exclusive_skip_mode_records_nothing(tmp_path: Path, logs: LogLines) -> None:
    exclusive = Exclusive(tmp_path)
    inner: list[ExclusiveResult] = []

    def job() -> bool:
        inner.append(Exclusive(tmp_path).run_or_skip(always_open))
        return True

    assert exclusive.run_or_skip(job) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert inner == [ExclusiveResult(Outcome.SKIPPED)]
    assert exclusive.pending() == 0
    assert [(line["event"], line["log_level"]) for line in logs] == [
        ("coord.skipped", "warning"),
        ("coord.ran", "info"),
    ]


def test_exclusive_skip_mode_holder_serves_queued_demand(tmp_path: Path) -> None:
    def job() -> bool:
        if not inner:
            inner.append(Exclusive(tmp_path).run(always_open).outcome)
        return True

    inner: list[Outcome] = []
    result = Exclusive(tmp_path).run_or_skip(job)
    assert inner == [Outcome.QUEUED]
    assert result.outcome is Outcome.RAN_QUEUED
    assert result.runs == 2


@pytest.mark.parametrize("max_reruns", [8, 2, 0])
def test_exclusive_rerun_cap_retires_and_leaves_demand(
    tmp_path: Path, logs: LogLines, max_reruns: int
) -> None:
    """A trigger source that never stops cannot pin one holder; its demand stays queued."""
    exclusive = Exclusive(tmp_path, max_reruns=max_reruns)
    assert exclusive.max_reruns == max_reruns
    requester = Exclusive(tmp_path)

    def relentless() -> bool:
        assert requester.run(always_open).outcome is Outcome.QUEUED
        return True

    result = exclusive.run(relentless)
    assert result.runs == 1 + max_reruns
    assert result.outcome is (Outcome.RAN_QUEUED if max_reruns else Outcome.RAN)
    assert exclusive.pending() == 1
    assert "retired" in decisions_in(logs)
    # The next acquisition's run covers the leftover demand and clears it.
    assert exclusive.run(always_open) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert exclusive.pending() == 0
    assert ("coord.orphan-cleared", str(tmp_path), 1) in log_lines(logs, "cleared")


def test_exclusive_default_cap_is_eight(tmp_path: Path) -> None:
    def relentless() -> bool:
        Exclusive(tmp_path).run(always_open)
        return True

    assert Exclusive(tmp_path).run(relentless).runs == 9


def test_exclusive_closed_gate_runs_nothing_and_keeps_demand(
    tmp_path: Path, logs: LogLines
) -> None:
    SlotFile(tmp_path / QUEUE_NAME).mutate(lambda _old: b"1")  # demand waiting
    calls: list[str] = []

    def job() -> bool:
        calls.append("ran")
        return True

    exclusive = Exclusive(tmp_path, gate=lambda: False)
    result = exclusive.run(job)
    assert result == ExclusiveResult(Outcome.GATED)
    assert calls == []
    assert exclusive.pending() == 1
    assert exclusive.run_or_skip(always_open).outcome is Outcome.GATED
    assert OverlapGuard(tmp_path / LOCK_NAME).try_acquire()  # the lock was released
    assert ("coord.gated", str(tmp_path), 1) in log_lines(logs, "pending")


def test_exclusive_gate_closing_mid_run_defers_reruns(tmp_path: Path, logs: LogLines) -> None:
    open_gate = True
    gate_checks = 0

    def gate() -> bool:
        nonlocal gate_checks
        gate_checks += 1
        return open_gate

    def job() -> bool:
        nonlocal open_gate
        assert Exclusive(tmp_path).run(always_open).outcome is Outcome.QUEUED
        open_gate = False  # shutdown begins while the run is in flight
        return True

    exclusive = Exclusive(tmp_path, gate=gate)
    result = exclusive.run(job)
    assert result == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert gate_checks == 2  # before the run, and before the rerun it then refused
    assert exclusive.pending() == 1
    assert "deferred" in decisions_in(logs)


@pytest.mark.parametrize("failure", ["raise", "false"])
def test_exclusive_failed_run_still_serves_queued_demand(tmp_path: Path, failure: str) -> None:
    attempts = 0

    def job() -> bool:
        nonlocal attempts
        attempts += 1
        if attempts > 1:
            return True
        queued = subprocess.run(
            [sys.executable, str(WORKER), "queue", str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert queued.stdout.strip() == "queued"  # recorded by another process
        if failure == "raise":
            raise OSError("disk on fire")
        return False

    exclusive = Exclusive(tmp_path)
    result = exclusive.run(job)
    assert result == ExclusiveResult(Outcome.RAN_QUEUED, runs=2, last_ok=True)
    assert exclusive.pending() == 0


def test_exclusive_rejects_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="queue_capacity"):
        Exclusive(tmp_path, queue_capacity=0)
    with pytest.raises(ValueError, match="max_reruns"):
        Exclusive(tmp_path, max_reruns=-1)


def test_exclusive_unusable_directory_raises_and_logs_none(tmp_path: Path, logs: LogLines) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    with pytest.raises(FileExistsError):
        Exclusive(not_a_dir).run(always_open)
    assert decisions_in(logs) == ["none"]
    assert logs[0]["log_level"] == "error"
