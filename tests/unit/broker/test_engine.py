"""The part of a broker that runs jobs, as the daemon and ``runbroker once`` each compose it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.broker.engine import Engine
from daemon.core.journal import Journal
from daemon.core.tasks import TaskRegistry
from daemon.settings import Settings, load_settings
from tests.unit.conftest import JOB_ENV


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> Settings:
    monkeypatch.setenv("RUNBROKER_GRACE", "2s")
    monkeypatch.setenv("RUNBROKER_QUEUE_CAPACITY", "50")
    monkeypatch.setenv("RUNBROKER_OUTPUT_LOG", "raw")
    monkeypatch.setenv("RUNBROKER_OUTPUT_HOLD", "7s")
    return load_settings()


def _parts_agree(engine: Engine) -> None:
    assert engine.executor.queue is engine.queue
    assert engine.executor.attempts.children is engine.children


def test_once_runs_one_run_with_its_lines_left_to_the_caller(settings: Settings) -> None:
    engine = Engine.for_once(settings, TaskRegistry({}))
    _parts_agree(engine)
    assert engine.queue.capacity == 1
    assert engine.executor.attempts.output_log is None
    assert engine.executor.attempts.default_grace_s == 2.0


async def test_the_daemon_takes_its_queue_log_hold_and_journal_from_its_settings(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal()
    engine = Engine.for_daemon(settings, TaskRegistry({}), journal, str(tmp_path))
    _parts_agree(engine)
    assert engine.queue.capacity == 50
    assert engine.executor.attempts.output_log is not None
    assert engine.executor.attempts.output_log.mode == "raw"
    assert engine.executor.attempts.output_hold_s == 7.0
    assert engine.executor.attempts.default_grace_s == 2.0
    assert engine.executor.journal is journal
    monkeypatch.chdir("/")
    lines: list[str] = []
    async with asyncio.timeout(20):
        await engine.children.run_command(
            ["pwd"], JOB_ENV, lambda _stream, new: lines.extend(new), grace_s=lambda: 1.0
        )
    assert lines == [str(tmp_path)]  # its commands start in the job directory
