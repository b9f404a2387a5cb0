"""The control operations the broker answers: one handler a request type.

The codec decodes a request line to its type; the connection streams ``logs`` itself and hands
every other control request to ``Broker.control``, which looks its handler up here. A new
operation is a request type (``wire.protocol``), its handler here and its command (``face``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from daemon.broker.cancel import cancel_run
from daemon.observe import status
from daemon.observe.sources import BrokerState
from daemon.observe.upcoming import next_answer
from daemon.wire.codec import parse_instant
from daemon.wire.protocol import (
    AnsweredRequest,
    CancelRequest,
    HealthRequest,
    NextRequest,
    ReloadRequest,
    StatusRequest,
)

if TYPE_CHECKING:
    from daemon.broker.reload.asking import Answer
    from daemon.broker.reload.reloader import TaskReloader
    from daemon.core.executor import Executor
    from daemon.settings import Settings


class Broker(BrokerState, Protocol):
    """What the operations read of the broker (``app.Broker`` is the one), beyond ``status``'s."""

    settings: Settings  # the whole settings: ``status`` reads only a part of them
    executor: Executor
    reloader: TaskReloader


# A request's answer, or its future (a reload's: made by the reload loop, ``reload.asking``).
Operation = Callable[[Broker, Any], "Mapping[str, Any] | Answer"]


def _status(broker: Broker, _request: StatusRequest) -> Mapping[str, Any]:
    return status.status_answer(broker)


def _health(broker: Broker, _request: HealthRequest) -> Mapping[str, Any]:
    return status.health_answer(broker)


def _cancel(broker: Broker, request: CancelRequest) -> Mapping[str, Any]:
    return cancel_run(broker.queue, broker.executor, request.id)


def _reload(broker: Broker, request: ReloadRequest) -> Answer:
    return broker.reloader.requests.ask(request)


def _next(broker: Broker, request: NextRequest) -> Mapping[str, Any]:
    return next_answer(
        broker.ticker.plans,
        broker.tasks,
        task=request.task,
        count=request.count,
        now=parse_instant(request.after) or datetime.now(UTC),
        jitter=broker.settings.jitter,
        source="daemon",
    )


OPERATIONS: dict[type[AnsweredRequest], Operation] = {
    StatusRequest: _status,
    HealthRequest: _health,
    CancelRequest: _cancel,
    ReloadRequest: _reload,
    NextRequest: _next,
}
