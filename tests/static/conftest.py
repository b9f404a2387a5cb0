"""Fixtures shared by the static checks that also run something for real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import Workdir


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short temporary directory (socket paths are limited to about 107 bytes)."""
    work = Workdir()
    try:
        yield work.path
    finally:
        work.cleanup()
