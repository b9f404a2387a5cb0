"""Fixtures for acceptance tests: real daemons as PID 1, clients through nsenter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pgsupport import fresh_database


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/acceptance/" in str(item.path):
            item.add_marker(pytest.mark.acceptance)


@pytest.fixture
def dsn() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test."""
    with fresh_database() as url:
        yield url
