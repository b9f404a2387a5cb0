"""The subscribers of one kind of news the core tells (a run submitted or finished, a slot
settled, the tasks file reloaded): called in order, synchronously, each one guarded.

A subscriber that raises is logged once, with its traceback, and stays subscribed (a metric's
bug must not end the metrics): its error never reaches the executor, the ticker or a reload,
which tell their news from inside their own work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from daemon.log.logs import get_logger

log = get_logger("runbroker.subscribers")

T = TypeVar("T")


class Subscribers(Generic[T]):
    """The callbacks told each ``T`` (a tuple swapped on change: telling copies nothing)."""

    __slots__ = ("_callbacks", "_logged", "failures", "news")

    def __init__(self, news: str) -> None:
        self.news = news  # what is told (``run.finished``), named in the log line of a failure
        self._callbacks: tuple[Callable[[T], None], ...] = ()
        self._logged: list[Callable[[T], None]] = []  # the subscribers whose failure was logged
        self.failures = 0  # every failure, logged or not

    def add(self, callback: Callable[[T], None]) -> None:
        self._callbacks = (*self._callbacks, callback)

    def remove(self, callback: Callable[[T], None]) -> None:
        """``callback`` hears nothing more (nothing happens when it was not subscribed)."""
        if callback in self._callbacks:
            kept = list(self._callbacks)
            kept.remove(callback)
            self._callbacks = tuple(kept)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __contains__(self, callback: object) -> bool:
        return callback in self._callbacks

    def tell(self, news: T) -> None:
        """Call every subscriber with ``news``; none of their errors reaches the caller."""
        for callback in self._callbacks:
            try:
                callback(news)
            except BaseException as exc:  # a CancelledError too: it is not the caller's
                self._failed(callback, exc)

    def _failed(self, callback: Callable[[T], None], exc: BaseException) -> None:
        self.failures += 1
        if callback in self._logged:
            return
        self._logged.append(callback)
        log.error(
            "subscriber.failed",
            news=self.news,
            subscriber=getattr(callback, "__qualname__", type(callback).__name__),
            error_type=type(exc).__name__,
            exc_info=exc,
        )
