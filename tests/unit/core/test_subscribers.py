"""Subscribers (daemon/core/subscribers.py): every one is told, in order; one that raises is
logged once, stays subscribed, and its error never reaches the caller."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from daemon.core.subscribers import Subscribers


@pytest.mark.parametrize(
    "error", [RuntimeError("a metrics bug"), asyncio.CancelledError(), SystemExit(3)]
)
def test_a_subscriber_that_raises_is_logged_once_and_the_others_are_told(
    error: BaseException, logs: list[MutableMapping[str, Any]]
) -> None:
    subscribers: Subscribers[int] = Subscribers("run.finished")
    before: list[int] = []
    after: list[int] = []
    calls = 0

    def broken(_news: int) -> None:
        nonlocal calls
        calls += 1
        raise error

    subscribers.add(before.append)
    subscribers.add(broken)
    subscribers.add(after.append)
    subscribers.tell(1)
    subscribers.tell(2)
    assert before == after == [1, 2]
    assert calls == 2  # kept: a passing bug does not end it for good
    assert subscribers.failures == 2
    failed = [line for line in logs if line["event"] == "subscriber.failed"]
    assert len(failed) == 1
    assert failed[0]["news"] == "run.finished"
    assert failed[0]["error_type"] == type(error).__name__
    assert "broken" in failed[0]["subscriber"]


def test_a_removed_subscriber_hears_nothing_more() -> None:
    subscribers: Subscribers[str] = Subscribers("run.submitted")
    heard: list[str] = []
    subscribers.add(heard.append)
    subscribers.tell("a")
    subscribers.remove(heard.append)
    subscribers.remove(heard.append)  # twice: nothing happens
    subscribers.tell("b")
    assert heard == ["a"]
    assert len(subscribers) == 0


def test_a_subscriber_that_removes_itself_while_told_does_not_skip_the_next() -> None:
    subscribers: Subscribers[int] = Subscribers("run.submitted")
    heard: list[int] = []

    def once(_news: int) -> None:
        subscribers.remove(once)

    subscribers.add(once)
    subscribers.add(heard.append)
    subscribers.tell(1)
    subscribers.tell(2)
    assert heard == [1, 2]
    assert once not in subscribers
