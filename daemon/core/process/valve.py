"""What the command runner needs of the readers that may hold a run's output back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class OutputValve(Protocol):
    """Connected to a running child: ``pause`` when a reader holds the output back, ``resume``
    when none does (``flow.OutputFlow`` beside it is one)."""

    def connect(self, pause: Callable[[], None], resume: Callable[[], None]) -> None: ...

    def disconnect(self) -> None: ...
