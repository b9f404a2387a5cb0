"""daemon.coord: overlap guard, slot file and cross-process run coalescing.

Multi-process tests start real processes (coord_worker.py beside this file) and line them up with
pipes; in-process tests use a second descriptor on the same file, which flock treats exactly
like another process.
"""

from __future__ import annotations

import bisect
import collections
import json
import logging
import signal
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.coord.exclusive import LOCK_NAME, QUEUE_NAME, Exclusive
from daemon.coord.guard import OverlapGuard, read_holder
from daemon.coord.outcome import ExclusiveResult, Outcome
from daemon.coord.slot import SlotFile

WORKER = Path(__file__).with_name("coord_worker.py")


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _race(argv_per_worker: list[list[str]]) -> list[str]:
    """Start every worker, wait until all are ready, release them at once, return their output."""
    procs = [_spawn(*argv) for argv in argv_per_worker]
    try:
        for proc in procs:
            assert _read_line(proc) == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0] * len(procs)
    return outputs


@pytest.fixture
def held_worker() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Spawn holder processes; any still alive at the end are killed."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = _spawn(*args)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def coord_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="runbroker.coord")
    return caplog


def _decisions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [getattr(record, "coord_decision", "") for record in caplog.records]


def _lines(caplog: pytest.LogCaptureFixture, *fields: str) -> list[tuple[object, ...]]:
    """Each line as (event, dir, the named fields): the fields are the record's, not text."""
    return [
        (r.getMessage(), getattr(r, "dir", None), *(getattr(r, f, None) for f in fields))
        for r in caplog.records
    ]


def _ok() -> bool:
    return True


# --------------------------------------------------------------------------- overlap guard


def test_guard_is_exclusive_records_time_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "once.lock"
    first, second = OverlapGuard(path), OverlapGuard(path)
    before = datetime.now(UTC)
    assert first.try_acquire()
    after = datetime.now(UTC)
    assert not second.try_acquire()
    info = read_holder(path)
    assert info.held is True
    assert info.acquired_at is not None
    assert before - timedelta(milliseconds=1) <= info.acquired_at <= after
    assert info.held_for_s is not None
    assert info.held_for_s >= 0.0
    # Probing never makes a real acquisition attempt fail.
    assert not second.try_acquire()
    first.release()
    first.release()  # idempotent
    assert path.exists()
    assert read_holder(path).held is False
    assert second.try_acquire()
    second.release()


def test_guard_context_manager_reports_acquisition(tmp_path: Path) -> None:
    path = tmp_path / "once.lock"
    with OverlapGuard(path) as acquired:
        assert acquired
        with OverlapGuard(path) as nested:
            assert not nested
        assert read_holder(path).held is True
    assert read_holder(path).held is False
    guard = OverlapGuard(path)
    assert guard.try_acquire()
    with pytest.raises(RuntimeError, match="already held"):
        guard.try_acquire()
    guard.release()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"2024-05-01T12:",
        b"2024-05-01T12:00:00.000000Z",  # no terminating newline: write not finished
        b"2024-05-01T12:00:00.000000\n",  # naive time
        b"2024-05-01\n",
        b"\xff\xfe garbage\n",
        b"2024-05-01T12:00:00Z\n2024-05-01T12:00:00Z\n",
    ],
)
def test_read_holder_torn_or_absent_timestamp_is_unknown(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "once.lock"
    with OverlapGuard(path) as acquired:
        assert acquired
        path.write_bytes(raw)
        info = read_holder(path)
    assert info.held is True
    assert info.acquired_at is None
    assert info.held_for_s is None


def test_read_holder_parses_a_foreign_offset_and_ignores_stale_stamps(tmp_path: Path) -> None:
    path = tmp_path / "once.lock"
    assert read_holder(path).held is False  # absent file: nobody holds it
    assert not path.exists()  # and probing did not create it
    with OverlapGuard(path) as acquired:
        assert acquired
        path.write_bytes(b"2024-05-01T14:00:00+02:00\n")
        info = read_holder(path)
    assert info.acquired_at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert info.held_for_s is not None
    assert info.held_for_s > 3600
    # A stamp nobody holds (left by a crash) is not reported as a holder.
    path.write_bytes(b"2024-05-01T12:00:00Z\n")
    assert read_holder(path) == read_holder(tmp_path / "absent")


def test_guard_killed_holder_frees_the_lock(
    tmp_path: Path, held_worker: Callable[..., subprocess.Popen[str]]
) -> None:
    path = tmp_path / "once.lock"
    before = datetime.now(UTC)
    proc = held_worker("hold-guard", str(path))
    assert _read_line(proc) == "acquired"
    info = read_holder(path)
    assert info.held is True
    assert info.acquired_at is not None
    assert before - timedelta(milliseconds=1) <= info.acquired_at <= datetime.now(UTC)
    assert not OverlapGuard(path).try_acquire()
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert path.read_bytes() != b""  # the dead holder's stamp is still in the file ...
    assert read_holder(path).held is False  # ... but nobody is reported as holding
    guard = OverlapGuard(path)
    assert guard.try_acquire()
    guard.release()


# --------------------------------------------------------------------------- slot file


def _frame(payload: bytes) -> bytes:
    return b"RBSLOT1 %08x %08x\n%s" % (len(payload), zlib.crc32(payload), payload)


def test_slot_round_trip_returns_what_fn_saw(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    assert slot.read() == b""
    assert not slot.path.exists()  # reading creates nothing
    assert slot.mutate(lambda old: old + b"a") == b""
    inode = slot.path.stat().st_ino
    assert slot.mutate(lambda old: old + b"\x00b") == b"a"
    assert slot.read() == b"a\x00b"
    assert slot.mutate(lambda _old: b"") == b"a\x00b"
    assert slot.read() == b""
    assert slot.path.stat().st_ino == inode  # rewritten in place, never replaced
    assert slot.path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x00\x00",
        b"42",
        _frame(b"hello")[:-2],  # cut short
        _frame(b"hello").replace(b"hello", b"hellO"),  # payload does not match its CRC
        _frame(b"hello")[:12],  # header cut short
        b"RBSLOT1 zzzzzzzz 00000000\nhello",
    ],
)
def test_slot_torn_contents_read_as_empty(tmp_path: Path, raw: bytes) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.path.write_bytes(raw)
    assert slot.read() == b""
    # Unchanged result: the torn bytes are left as they were (no write).
    assert slot.mutate(lambda old: old) == b""
    assert slot.path.read_bytes() == raw
    assert slot.mutate(lambda old: old + b"fresh") == b""
    assert slot.read() == b"fresh"


def test_slot_tail_left_by_an_interrupted_shrink_is_ignored(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.path.write_bytes(_frame(b"new") + b"tail of an older, longer value")
    assert slot.read() == b"new"


def test_slot_fn_error_writes_nothing(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.mutate(lambda _old: b"kept")

    def boom(_old: bytes) -> bytes:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        slot.mutate(boom)
    assert slot.read() == b"kept"
    assert slot.mutate(lambda old: old) == b"kept"  # the lock was released


def test_slot_lossless_counter_across_processes(tmp_path: Path) -> None:
    slot_path = tmp_path / "counter"
    workers, increments = 8, 50
    outputs = _race([["count", str(slot_path), str(increments)] for _ in range(workers)])
    seen = sorted(value for out in outputs for value in json.loads(out))
    # Every increment saw a distinct value: no two read-modify-writes interleaved.
    assert seen == list(range(workers * increments))
    assert SlotFile(slot_path).read() == str(workers * increments).encode()


# --------------------------------------------------------------------------- exclusive


def test_exclusive_runs_when_free_and_reports_the_run(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
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
    assert _lines(coord_log, "runs", "last_ok")[-1] == ("coord.ran", str(directory), 1, False)


def test_exclusive_raising_job_is_a_failed_run(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
    def job() -> bool:
        raise RuntimeError("secret-payload")

    result = Exclusive(tmp_path).run(job)
    assert result.outcome is Outcome.RAN
    assert result.last_ok is False
    assert isinstance(result.last_error, RuntimeError)
    assert "run-failed" in _decisions(coord_log)
    assert all("secret-payload" not in message for message in coord_log.messages)
    assert OverlapGuard(tmp_path / LOCK_NAME).try_acquire()  # released


def test_exclusive_busy_lock_queues_then_discards(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
    exclusive = Exclusive(tmp_path)
    other = Exclusive(tmp_path)  # another caller; flock treats its descriptor as a rival
    inner: list[ExclusiveResult] = []
    runs = 0

    def job() -> bool:
        nonlocal runs
        runs += 1
        if runs == 1:
            inner.append(other.run(_ok))
            inner.append(other.run(_ok))
            assert other.pending() == 1
        return True

    result = exclusive.run(job)
    assert [r.outcome for r in inner] == [Outcome.QUEUED, Outcome.DISCARDED]
    assert [r.runs for r in inner] == [0, 0]
    assert result == ExclusiveResult(Outcome.RAN_QUEUED, runs=2, last_ok=True)
    assert exclusive.pending() == 0
    assert ("coord.queued", str(tmp_path), 1) in _lines(coord_log, "pending")
    assert ("coord.discarded", str(tmp_path), 1) in _lines(coord_log, "pending")
    assert "rerun" in _decisions(coord_log)


def test_exclusive_capacity_two_gives_two_reruns(tmp_path: Path) -> None:
    exclusive = Exclusive(tmp_path, queue_capacity=2)
    assert exclusive.queue_capacity == 2
    inner: list[Outcome] = []

    def job() -> bool:
        if not inner:
            inner.extend(Exclusive(tmp_path, queue_capacity=2).run(_ok).outcome for _ in range(3))
        return True

    result = exclusive.run(job)
    assert inner == [Outcome.QUEUED, Outcome.QUEUED, Outcome.DISCARDED]
    assert result.runs == 3
    assert exclusive.pending() == 0


def test_exclusive_skip_mode_records_nothing(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
    exclusive = Exclusive(tmp_path)
    inner: list[ExclusiveResult] = []

    def job() -> bool:
        inner.append(Exclusive(tmp_path).run_or_skip(_ok))
        return True

    assert exclusive.run_or_skip(job) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert inner == [ExclusiveResult(Outcome.SKIPPED)]
    assert exclusive.pending() == 0
    assert "skipped" in _decisions(coord_log)


def test_exclusive_skip_mode_holder_serves_queued_demand(tmp_path: Path) -> None:
    def job() -> bool:
        if not inner:
            inner.append(Exclusive(tmp_path).run(_ok).outcome)
        return True

    inner: list[Outcome] = []
    result = Exclusive(tmp_path).run_or_skip(job)
    assert inner == [Outcome.QUEUED]
    assert result.outcome is Outcome.RAN_QUEUED
    assert result.runs == 2


@pytest.mark.parametrize("max_reruns", [8, 2, 0])
def test_exclusive_rerun_cap_retires_and_leaves_demand(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture, max_reruns: int
) -> None:
    """A trigger source that never stops cannot pin one holder; its demand stays queued."""
    exclusive = Exclusive(tmp_path, max_reruns=max_reruns)
    assert exclusive.max_reruns == max_reruns
    requester = Exclusive(tmp_path)

    def relentless() -> bool:
        assert requester.run(_ok).outcome is Outcome.QUEUED
        return True

    result = exclusive.run(relentless)
    assert result.runs == 1 + max_reruns
    assert result.outcome is (Outcome.RAN_QUEUED if max_reruns else Outcome.RAN)
    assert exclusive.pending() == 1
    assert "retired" in _decisions(coord_log)
    # The next acquisition's run covers the leftover demand and clears it.
    assert exclusive.run(_ok) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert exclusive.pending() == 0
    assert ("coord.orphan-cleared", str(tmp_path), 1) in _lines(coord_log, "cleared")


def test_exclusive_default_cap_is_eight(tmp_path: Path) -> None:
    def relentless() -> bool:
        Exclusive(tmp_path).run(_ok)
        return True

    assert Exclusive(tmp_path).run(relentless).runs == 9


def test_exclusive_closed_gate_runs_nothing_and_keeps_demand(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
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
    assert exclusive.run_or_skip(_ok).outcome is Outcome.GATED
    assert OverlapGuard(tmp_path / LOCK_NAME).try_acquire()  # the lock was released
    assert ("coord.gated", str(tmp_path), 1) in _lines(coord_log, "pending")


def test_exclusive_gate_closing_mid_run_defers_reruns(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
    open_gate = True
    gate_checks = 0

    def gate() -> bool:
        nonlocal gate_checks
        gate_checks += 1
        return open_gate

    def job() -> bool:
        nonlocal open_gate
        assert Exclusive(tmp_path).run(_ok).outcome is Outcome.QUEUED
        open_gate = False  # shutdown begins while the run is in flight
        return True

    exclusive = Exclusive(tmp_path, gate=gate)
    result = exclusive.run(job)
    assert result == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert gate_checks == 2  # before the run, and before the rerun it then refused
    assert exclusive.pending() == 1
    assert "deferred" in _decisions(coord_log)


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


def test_exclusive_killed_holder_frees_lock_and_orphan_is_cleared(
    tmp_path: Path,
    held_worker: Callable[..., subprocess.Popen[str]],
    coord_log: pytest.LogCaptureFixture,
) -> None:
    proc = held_worker("hold-exclusive", str(tmp_path))
    assert _read_line(proc) == "running"
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
    assert ("coord.orphan-cleared", str(tmp_path), 1) in _lines(coord_log, "cleared")


def test_exclusive_request_racing_the_holders_release_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coord_log: pytest.LogCaptureFixture
) -> None:
    """A request recorded after the holder's last empty check, before it releases."""
    exclusive = Exclusive(tmp_path)
    real_release = OverlapGuard.release
    injected: list[Outcome] = []

    def release(guard: OverlapGuard) -> None:
        if guard.held and not injected:
            injected.append(Exclusive(tmp_path).run(_ok).outcome)
        real_release(guard)

    monkeypatch.setattr(OverlapGuard, "release", release)
    result = exclusive.run(_ok)
    assert injected == [Outcome.QUEUED]
    assert result == ExclusiveResult(Outcome.RAN_QUEUED, runs=2, last_ok=True)
    assert exclusive.pending() == 0
    assert "handoff" in _decisions(coord_log)


def test_exclusive_requester_racing_the_holders_exit_runs_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coord_log: pytest.LogCaptureFixture
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
    assert exclusive.run(_ok) == ExclusiveResult(Outcome.RAN, runs=1, last_ok=True)
    assert exclusive.pending() == 0
    decisions = _decisions(coord_log)
    assert "reprobe" in decisions
    assert "orphan-cleared" not in decisions  # its own request, not an orphan


def test_exclusive_rejects_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="queue_capacity"):
        Exclusive(tmp_path, queue_capacity=0)
    with pytest.raises(ValueError, match="max_reruns"):
        Exclusive(tmp_path, max_reruns=-1)


def test_exclusive_unusable_directory_raises_and_logs_none(
    tmp_path: Path, coord_log: pytest.LogCaptureFixture
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    with pytest.raises(FileExistsError):
        Exclusive(not_a_dir).run(_ok)
    assert _decisions(coord_log) == ["none"]


def test_exclusive_hammer_never_overlaps_and_never_strands_demand(tmp_path: Path) -> None:
    """8 processes x 25 runs, capacity 2, all released together in each of 25 rounds.

    After every round all 8 calls have returned, so no holder is left: any request still
    queued would be lost demand (a round has at most 7 requests, below the rerun cap).
    """
    workers, rounds = 8, 25
    procs = [_spawn("hammer", str(tmp_path), "2") for _ in range(workers)]
    exclusive = Exclusive(tmp_path)
    reports: list[dict[str, Any]] = []
    try:
        for proc in procs:
            assert _read_line(proc) == "ready"
        for round_no in range(rounds):
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            round_reports = [json.loads(_read_line(proc)) for proc in procs]
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
