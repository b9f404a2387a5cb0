"""What status, health and metrics read of the running daemon, as Protocols.

``observe`` depends on these shapes rather than on the broker and the Postgres runner, which
sit above it or load only with a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from daemon.wire.control_shapes import (
    DatabaseStatus,
    NotifyStatus,
    ReloadStatus,
    StateDirStatus,
)

if TYPE_CHECKING:
    from daemon.core.journal import Journal
    from daemon.core.runqueue import Run, RunQueue
    from daemon.core.strays import Stray
    from daemon.core.tasks import TaskRegistry
    from daemon.core.ticker.ticker import Ticker


class RunnerFigures(Protocol):
    """What the Postgres runner exposes for scraping."""

    def metrics_snapshot(self) -> dict[str, float]: ...


class RunnerStatus(Protocol):
    """What ``status`` and ``health`` read of the Postgres runner."""

    def status(self) -> DatabaseStatus: ...

    def health_problem(self) -> str | None: ...

    def health_warnings(self) -> list[str]: ...


class ReloadRecord(Protocol):
    """What ``status`` and ``health`` read of the tasks file's reloads."""

    def status(self) -> ReloadStatus: ...

    def health_warnings(self) -> list[str]: ...


class NotifyRecord(Protocol):
    """What ``status``, ``health`` and the metrics read of the notifications
    (``daemon.notify.notifier.Notifier``)."""

    def status(self) -> NotifyStatus | None: ...

    def health_warnings(self) -> list[str]: ...


class StateRecord(Protocol):
    """What ``status``, ``health`` and the metrics read of the state directory
    (``daemon.core.ticker.slot_state.SlotState``)."""

    def status(self) -> StateDirStatus: ...

    def health_warnings(self) -> list[str]: ...


class GraceSetting(Protocol):
    """The one setting health reads: the grace of a task that sets none of its own."""

    @property
    def grace_s(self) -> float: ...


class BrokerState(Protocol):
    """What ``status`` and ``health`` read of the broker."""

    @property
    def settings(self) -> GraceSetting: ...

    @property
    def tasks(self) -> TaskRegistry: ...

    @property
    def queue(self) -> RunQueue: ...

    @property
    def ticker(self) -> Ticker: ...

    @property
    def journal(self) -> Journal:
        """The output journal of ``runbroker logs``."""

    @property
    def recent(self) -> Iterable[Run]:
        """The latest finished runs, newest first."""

    @property
    def strays(self) -> list[Stray]:
        """The handlers the executor gave up on that still run, the oldest first."""

    @property
    def reaper_mode(self) -> str:
        """How orphans reach the reaper (``daemon.core.subreaper``)."""

    @property
    def started_at(self) -> float:
        """Unix time the broker started."""

    @property
    def reloader(self) -> ReloadRecord: ...

    @property
    def notifier(self) -> NotifyRecord: ...

    @property
    def pgrunner(self) -> RunnerStatus | None:
        """None without a database."""

    @property
    def slot_state(self) -> StateRecord | None:
        """None without a state directory."""
