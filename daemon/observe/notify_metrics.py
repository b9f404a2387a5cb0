"""The notifications' series, read from the notifier at scrape time (the hot path pays
nothing): what was sent, given up, retried and dropped, what waits, and each silent task."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from daemon.observe.sources import NotifyRecord

KINDS = ("webhook", "ping", "command")
# The notifier's figures of one number each, as series: zero without a notifier.
NOTIFY_FIGURES: tuple[
    tuple[
        type[GaugeMetricFamily | CounterMetricFamily],
        str,
        str,
        Literal["dropped", "retries", "pending"],
    ],
    ...,
] = (
    (
        CounterMetricFamily,
        "runbroker_notifications_dropped",
        "Notifications dropped: the oldest of a full queue, or left at the end of a shutdown.",
        "dropped",
    ),
    (
        CounterMetricFamily,
        "runbroker_notification_retries",
        "HTTP notification attempts after a first one.",
        "retries",
    ),
    (
        GaugeMetricFamily,
        "runbroker_notifications_pending",
        "Notifications waiting to be sent.",
        "pending",
    ),
)


class NotifyCollector(Collector):
    def __init__(self, notifier: NotifyRecord | None) -> None:
        self.notifier = notifier

    def collect(self) -> Iterable[Metric]:
        status = None if self.notifier is None else self.notifier.status()
        kinds = status["kinds"] if status is not None else {}
        sent = CounterMetricFamily(
            "runbroker_notifications",
            "Notifications by kind (webhook, ping, command) and result (sent; failed: given up"
            " after its attempts).",
            labels=["kind", "result"],
        )
        for kind in KINDS:
            figures = kinds.get(kind, {"sent": 0, "failed": 0})
            sent.add_metric([kind, "sent"], figures["sent"])
            sent.add_metric([kind, "failed"], figures["failed"])
        yield sent
        for family, name, documentation, figure in NOTIFY_FIGURES:
            yield family(name, documentation, value=0 if status is None else status[figure])
        silent = GaugeMetricFamily(
            "runbroker_task_silent_seconds",
            "Each task past its max_silence: how long it has gone without a success (a series"
            " only while it is silent).",
            labels=["task"],
        )
        for item in [] if status is None else status["silent"]:
            silent.add_metric([item["task"]], item["silent_for_s"])
        yield silent
