"""The broker's table of operations: one handler for each request type it answers, and none for
``logs``, whose answer the connection streams."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.broker.operations import OPERATIONS
from daemon.wire.protocol import (
    CONTROL_REQUESTS,
    AnsweredRequest,
    ControlRequest,
    LogsRequest,
    NextRequest,
)

ANSWERED: tuple[type[ControlRequest], ...] = AnsweredRequest.__args__


def _table_gaps(kinds: tuple[type[ControlRequest], ...], table: Mapping[type, object]) -> list[str]:
    """What keeps each request type of ``kinds`` from exactly one entry, and an entry from
    answering a request type the broker answers."""
    gaps = [f"{kind.__name__} has no operation" for kind in kinds if kind not in table]
    return gaps + [
        f"{kind.__name__} is not answered by the broker" for kind in table if kind not in kinds
    ]


def test_every_answered_request_type_has_one_operation() -> None:
    assert _table_gaps(ANSWERED, OPERATIONS) == []


def test_every_control_request_is_answered_by_the_broker_or_streamed() -> None:
    assert set(CONTROL_REQUESTS) == {*ANSWERED, LogsRequest}
    assert LogsRequest not in ANSWERED


def test_the_table_check_sees_a_missing_and_a_stray_operation() -> None:
    missing = {kind: handler for kind, handler in OPERATIONS.items() if kind is not NextRequest}
    assert _table_gaps(ANSWERED, missing) == ["NextRequest has no operation"]
    stray: dict[type, object] = {**OPERATIONS, LogsRequest: OPERATIONS[NextRequest]}
    assert _table_gaps(ANSWERED, stray) == ["LogsRequest is not answered by the broker"]
