"""The state directory: what a daemon wrote is what the next one reads, and anything else found
there (another daemon, a corrupt, foreign, huge, symlinked or FIFO file) is refused clearly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.core.ticker.slot_state import (
    SET_ASIDE_SUFFIX,
    STATE_FILE,
    SlotState,
    StateDirRefused,
)
from daemon.core.ticker.state_file import FORMAT, STATE_BYTES_MAX, VERSION
from tests.support.eventually import eventually_async


def _opened(directory: Path) -> SlotState:
    state = SlotState(directory)
    state.open()
    return state


def test_what_one_daemon_wrote_the_next_reads(tmp_path: Path) -> None:
    first = _opened(tmp_path / "state")
    first.planned("nightly", 1_700_000_000.5)
    first.planned("hourly", 1_700_003_600.0)
    first.planned("hourly", 1_700_000_000.0)  # older than what is known: kept as it was
    first.close()
    second = SlotState(tmp_path / "state")
    loaded = second.open()
    assert loaded.problem == ""
    assert loaded.last_planned == {"nightly": 1_700_000_000.5, "hourly": 1_700_003_600.0}
    second.close()


def test_the_file_is_replaced_whole_and_owner_only(tmp_path: Path) -> None:
    state = _opened(tmp_path)
    state.planned("nightly", 1.0)
    assert state.write()
    assert sorted(os.listdir(tmp_path)) == ["runbroker.lock", STATE_FILE]  # no temporary left
    assert (tmp_path / STATE_FILE).stat().st_mode & 0o777 == 0o600
    document = json.loads((tmp_path / STATE_FILE).read_text())
    assert document == {
        "format": FORMAT,
        "version": VERSION,
        "tasks": {"nightly": {"last_planned": 1.0}},
    }
    state.close()


def test_a_second_daemon_on_the_directory_is_refused(tmp_path: Path) -> None:
    first = _opened(tmp_path)
    with pytest.raises(StateDirRefused, match="in use by another runbroker daemon"):
        SlotState(tmp_path).open()
    first.close()
    _opened(tmp_path).close()  # free again once the first has gone


def test_a_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a directory")
    with pytest.raises(StateDirRefused, match="RUNBROKER_STATE_DIR"):
        SlotState(tmp_path / "state").open()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "Invalid JSON"),
        (b"\xff\xfe", "Invalid JSON"),
        (b"[]", "Input should be an object"),
        (b"[" * 200_000, "recursion limit"),
        (json.dumps({"format": "other", "version": 1, "tasks": {}}).encode(), "format"),
        (json.dumps({"format": FORMAT, "version": 99, "tasks": {}}).encode(), "version"),
        (json.dumps({"format": FORMAT, "version": VERSION, "tasks": []}).encode(), "tasks"),
        (
            json.dumps(
                {"format": FORMAT, "version": 1, "tasks": {"t": {"last_planned": "x"}}}
            ).encode(),
            "tasks.t.last_planned",
        ),
        (
            b'{"format": "runbroker.slots", "version": 1, "tasks": {"t": {"last_planned": NaN}}}',
            "finite",
        ),
        (
            b'{"format": "runbroker.slots", "version": 1, "tasks": {"t": {"last_planned": '
            + b"9" * 400
            + b"}}}",
            "tasks.t.last_planned",
        ),
        (
            json.dumps(
                {"format": FORMAT, "version": 1, "tasks": {"t": {"last_planned": -1e300}}}
            ).encode(),
            "greater than or equal to 0",
        ),
    ],
)
def test_a_file_that_is_not_ours_is_set_aside_and_start_goes_on(
    tmp_path: Path, content: bytes, why: str
) -> None:
    (tmp_path / STATE_FILE).write_bytes(content)
    state = SlotState(tmp_path)
    loaded = state.open()
    assert loaded.last_planned == {}
    assert why in loaded.problem
    assert "no catch-up this start" in loaded.problem
    assert (tmp_path / (STATE_FILE + SET_ASIDE_SUFFIX)).read_bytes() == content  # kept
    state.planned("nightly", 5.0)
    state.close()
    assert _opened(tmp_path).last_planned == {"nightly": 5.0}


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / STATE_FILE)
    loaded = SlotState(tmp_path).open()
    assert "not a regular file" in loaded.problem


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"format": FORMAT, "version": VERSION, "tasks": {}}))
    (tmp_path / STATE_FILE).symlink_to(target)
    loaded = SlotState(tmp_path).open()
    assert "plain file" in loaded.problem
    assert target.exists()  # what it pointed at is left alone


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    with open(tmp_path / STATE_FILE, "wb") as handle:
        handle.truncate(STATE_BYTES_MAX + 1)
    loaded = SlotState(tmp_path).open()
    assert "larger than" in loaded.problem


def test_a_failed_write_is_counted_and_the_daemon_goes_on(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    state = _opened(directory)
    state.planned("nightly", 1.0)
    os.unlink(directory / "runbroker.lock")
    os.rmdir(directory)  # the volume went away under the daemon
    assert not state.write()
    assert state.write_failures == 1
    state.close()


def test_tasks_no_longer_scheduled_are_forgotten(tmp_path: Path) -> None:
    state = _opened(tmp_path)
    state.planned("kept", 1.0)
    state.planned("gone", 2.0)
    state.forget({"kept"})
    state.close()
    assert _opened(tmp_path).last_planned == {"kept": 1.0}


async def test_the_writer_writes_off_the_loop_when_told(tmp_path: Path) -> None:
    state = _opened(tmp_path)
    writer = asyncio.create_task(state.keep_written())
    state.planned("nightly", 7.0)
    await eventually_async((tmp_path / STATE_FILE).exists, "the state written by its thread")
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert json.loads((tmp_path / STATE_FILE).read_text())["tasks"] == {
        "nightly": {"last_planned": 7.0}
    }
    state.close()


def test_the_failing_tasks_are_kept_across_a_restart(tmp_path: Path) -> None:
    first = _opened(tmp_path)
    first.ended("backup", failed=True)
    first.ended("report", failed=True)
    first.ended("report", failed=False)
    first.close()
    second = SlotState(tmp_path)
    loaded = second.open()
    assert loaded.problem == ""
    assert loaded.failing == {"backup"}
    assert second.failing == {"backup"}
    second.close()


def test_a_slot_kept_past_now_is_rewound(tmp_path: Path) -> None:
    first = _opened(tmp_path)
    first.planned("nightly", 2_000_000_000.0)
    first.rewind("nightly", 1_780_000_000.0)
    first.planned("nightly", 1_780_000_001.0)  # and rises from there again
    first.close()
    assert _opened(tmp_path).last_planned == {"nightly": 1_780_000_001.0}


def test_the_daemon_builds_the_state_files_models_only_with_a_state_directory() -> None:
    """Its pydantic models cost every start some 20 ms: a daemon without a state directory
    imports everything it runs with (the composition root), but not them."""
    script = (
        "import sys\nimport daemon.broker.daemon_main, daemon.broker.app\n"
        "print('daemon.core.ticker.state_file' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["False"]
