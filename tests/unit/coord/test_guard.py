"""The overlap guard (daemon/coord/guard.py): exclusive, its holder's time recorded, the file
kept, and the lock freed when a holder is killed. In-process tests use a second descriptor on
the same file, which flock treats exactly like another process."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.coord.guard import OverlapGuard, read_holder
from tests.unit.coord.conftest import read_line


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
    assert read_line(proc) == "acquired"
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
