"""What became of the notices: sent and given up by kind, the last failure, and the incidents.

A target that gives up is one incident per task and kind: logged when it first gives up
(``notify.failed``), and when it works again (``notify.restored``), not at every notice in
between. The error said is a kind and a status, never the URL (it may carry a token): where the
URL came from is said instead.
"""

from __future__ import annotations

import time

from daemon.core.rfc3339 import rfc3339_utc_at
from daemon.log.logs import get_logger
from daemon.notify.delivery import Delivery
from daemon.notify.notice import Notice
from daemon.wire.control_shapes import NotifyFailure, NotifyKindFigures

log = get_logger("runbroker.notify")

KINDS = ("webhook", "ping", "command")


class DeliveryRecord:
    def __init__(self) -> None:
        self.kinds: dict[str, NotifyKindFigures] = {k: {"sent": 0, "failed": 0} for k in KINDS}
        self.last_failure: NotifyFailure | None = None
        self._down: set[tuple[str, str]] = set()  # (task, kind) given up: one incident each

    def count(
        self, kind: str, notice: Notice, event: str, delivery: Delivery, url_from: str
    ) -> None:
        """``delivery`` of ``notice`` (as ``event``) at its ``kind`` of target."""
        key = (notice.task, kind)
        if delivery.ok:
            self.kinds[kind]["sent"] += 1
            if key in self._down:
                self._down.discard(key)
                log.info("notify.restored", task=notice.task, kind=kind, url_from=url_from)
            return
        self.kinds[kind]["failed"] += 1
        self.last_failure = {
            "task": notice.task,
            "kind": kind,
            "event": event,
            "error": delivery.error,
            "at": rfc3339_utc_at(time.time()),
        }
        if key not in self._down:
            self._down.add(key)
            log.warning(
                "notify.failed",
                task=notice.task,
                kind=kind,
                notify_event=event,
                run_id=notice.run_id,
                error=delivery.error,
                attempts=delivery.attempts,
                url_from=url_from,
            )

    @property
    def counted(self) -> int:
        return sum(figures["sent"] + figures["failed"] for figures in self.kinds.values())

    def figures(self) -> dict[str, NotifyKindFigures]:
        """A copy of the counts by kind, for ``status``."""
        return {k: {"sent": f["sent"], "failed": f["failed"]} for k, f in self.kinds.items()}
