"""Settings from the environment a test sets, and a Broker over a few tasks: what the broker's
tests share."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.core.tasks import Task
from daemon.settings import Settings, load_settings
from tests.unit.core.executing import registry_of, sh_task

MakeSettings = Callable[..., Settings]


Logs = list[MutableMapping[str, Any]]


# A shell runs its TERM trap only once its foreground child has ended, so "ready" comes from
# that child: when it is seen, SIGTERM to the group ends the child and the trap runs at once.
TERM_TRAP = "trap '{action}' TERM; while :; do sh -c 'echo ready; exec sleep 1'; done"


@pytest.fixture
def make_settings(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> MakeSettings:

    def make(**env: str) -> Settings:
        for name, value in env.items():
            monkeypatch.setenv(f"RUNBROKER_{name}", value)
        return load_settings()

    return make


DEFAULT = sh_task("default", "true")


def broker_of(settings: Settings, *tasks: Task) -> Broker:
    return Broker(settings, registry_of(*tasks), Signals())
