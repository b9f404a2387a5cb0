"""The nearest real setting for an unknown ``RUNBROKER_*`` variable (the start-up warning's
``did_you_mean``)."""

from __future__ import annotations

import pytest

from daemon.settings import nearest_setting


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("RUNBROKER_INTERVALL", "RUNBROKER_INTERVAL"),
        ("RUNBROKER_QUEUE_CAPACTY", "RUNBROKER_QUEUE_CAPACITY"),
        ("RUNBROKER_SHUTDOWN_TIMEOUTS", "RUNBROKER_SHUTDOWN_TIMEOUT"),
        ("RUNBROKER_DATABASE_UR", "RUNBROKER_DATABASE_URL"),
        ("RUNBROKER_LOGLEVEL", "RUNBROKER_LOG_LEVEL"),
        ("RUNBROKER_JITER", "RUNBROKER_JITTER"),
    ],
)
def test_an_unknown_variable_suggests_the_nearest_real_name(typo: str, meant: str) -> None:
    assert nearest_setting(typo) == meant


@pytest.mark.parametrize("name", ["RUNBROKER_GREETING", "RUNBROKER_X", "RUNBROKER_WORKERS"])
def test_no_suggestion_when_nothing_is_close(name: str) -> None:
    assert nearest_setting(name) is None
