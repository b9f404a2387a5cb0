"""tests/support/eventually.py: the bounded poll every tier waits with."""

from __future__ import annotations

import itertools

import pytest

from tests.support.eventually import eventually, eventually_async


def test_returns_the_first_value_the_wait_accepts() -> None:
    counter = itertools.count()
    assert eventually(lambda: next(counter), "a count of 3", until=lambda n: n >= 3) == 3


def test_fails_at_the_deadline_naming_the_wait_and_the_last_value() -> None:
    counter = itertools.count()
    with pytest.raises(AssertionError, match=r"waiting for the moon; last seen: \d+$") as failure:
        eventually(lambda: next(counter), "the moon", until=lambda _n: False, timeout_s=0.05)
    last = int(str(failure.value).rsplit(" ", 1)[1])
    assert last >= 1  # looked more than once before giving up


def test_looks_once_even_when_the_deadline_has_passed() -> None:
    assert eventually(lambda: "here", "a value", timeout_s=0.0) == "here"


async def test_async_form_awaits_coroutine_probes_and_takes_plain_ones() -> None:
    counter = itertools.count()

    async def looked() -> int:
        return next(counter)

    assert await eventually_async(looked, "a count of 2", until=lambda n: n >= 2) == 2
    assert await eventually_async(lambda: [1], "a list", every_s=0.0) == [1]
    with pytest.raises(AssertionError, match="waiting for nothing; last seen: None"):
        await eventually_async(lambda: None, "nothing", timeout_s=0.0)
