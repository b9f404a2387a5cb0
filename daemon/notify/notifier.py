"""The notifications: it hears runs end (and start) from the run queue, decides what to tell,
and sends it from tasks of its own, never on the executor's path.

The queue's listeners (``run_finished``, ``run_submitted``) do a bounded amount of work and
never wait: a dict lookup, and for a notified run a ``Notice`` put in the ``outbox``: the lanes
of its targets (``lanes``), each a bounded queue with a sender of its own. ``run`` (one task the
broker owns and awaits) starts each lane's sender in a TaskGroup of its own, and so awaits them
all; a sender sends its lane's notices in order, each bounded (``HttpTarget.give_up_after_s``,
or a command's timeout and grace): a slow or dead endpoint delays only its own notices, which
wait in its bounded queue. A target that fails is one incident (``record``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

import orjson

from daemon.core.runqueue import Event, Run
from daemon.core.tasks.notify_targets import CommandHook, HttpTarget
from daemon.log.logs import get_logger
from daemon.notify.delivery import Delivery
from daemon.notify.hook import HOOK_GRACE_S, run_hook
from daemon.notify.http_send import HttpSender, ping_url
from daemon.notify.lanes import NOTICES_MAX, Lane, Lanes
from daemon.notify.notice import TAIL_BYTES, Notice, document, run_notice, tail_text
from daemon.notify.outbox import OUTBOX_CAPACITY
from daemon.notify.record import DeliveryRecord
from daemon.notify.silence import SilenceWatch, auto_limit_s
from daemon.wire import protocol
from daemon.wire.control_shapes import NotifyStatus

if TYPE_CHECKING:
    from daemon.core.journal import Journal
    from daemon.core.process import ChildSupervisor
    from daemon.core.tasks import TaskRegistry
    from daemon.core.tasks.notify_targets import TaskNotify
    from daemon.core.ticker.slot_state import SlotState

log = get_logger("runbroker.notify")

CANCEL_SLACK_S = 0.25  # a cancelled sender ends within a hook's grace and this


class Notifier:
    def __init__(
        self,
        tasks: TaskRegistry,
        journal: Journal,
        children: ChildSupervisor,
        capacity: int = OUTBOX_CAPACITY,
        capacity_all: int = NOTICES_MAX,
    ) -> None:
        self._tasks = tasks
        self._journal = journal
        self._children = children
        self.outbox = Lanes(capacity, capacity_all)
        self.http = HttpSender()
        self.silence = SilenceWatch()
        self._configs: dict[str, TaskNotify] = {}
        self._start_tasks: frozenset[str] = frozenset()
        self._failing: set[str] = set()  # tasks whose last run failed
        self._kept: SlotState | None = None  # where ``_failing`` outlives a restart
        self.record = DeliveryRecord()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self.refresh()

    # -- the executor's side: bounded, never waits --------------------------------------------
    def refresh(self, _changes: object = None) -> None:
        """Read the tasks' notifications again (at start and after each reload)."""
        tasks = self._tasks.tasks
        self._configs = {name: t.notify for name, t in tasks.items() if t.notify is not None}
        self._start_tasks = frozenset(
            name for name, notify in self._configs.items() if notify.wants("start")
        )
        now = time.time()
        limits_s = {}
        for name, notify in self._configs.items():
            limit_s = notify.max_silence_s
            if limit_s is None and notify.max_silence_auto:
                task = tasks[name]
                limit_s = auto_limit_s(task.interval_s, task.schedule, now)
            if limit_s is not None:
                limits_s[name] = limit_s
        self.silence.refresh(limits_s)
        self.outbox.wake()

    def keep_failing_in(self, state: SlotState) -> None:
        """Which tasks' last run failed is kept in the state directory, and read from it now:
        the first success after a restart that followed a failure is a ``recovery``."""
        for gone in state.failing - set(self._tasks.tasks):
            state.ended(gone, failed=False)
        self._failing |= state.failing
        self._kept = state

    def run_submitted(self, run: Run) -> None:
        """A run was accepted: a task that notifies of starts hears this run's start."""
        if run.request.task in self._start_tasks:
            run.subscribe(self._run_event)

    def _run_event(self, run: Run, event: Event) -> None:
        run.unsubscribe(self._run_event)  # only its first event: not its output lines
        notify = self._configs.get(run.request.task)
        if event.kind == protocol.EVENT_STARTED and notify is not None:
            self.outbox.put(run_notice(run, ("start",), notify, None))

    def run_finished(self, run: Run) -> None:
        """A run has its result: a notice for its task's targets, when one listens."""
        task = run.request.task
        notify = self._configs.get(task)
        result = run.result
        if notify is None or result is None or run.started_at is None or result.cancelled:
            return  # a cancelled run, or one that never started, tells nothing of the task
        if result.ok:
            ended_silence = self.silence.succeeded(task)
            recovered = task in self._failing or ended_silence
            self._failing.discard(task)
            events: tuple[str, ...] = ("recovery", "success") if recovered else ("success",)
            changed = recovered
        else:
            changed = task not in self._failing
            self._failing.add(task)
            events = ("failure",)
        if self._kept is not None:
            self._kept.ended(task, failed=not result.ok)
        if notify.hears(events, changed):
            found = self._journal.find(run.id)
            self.outbox.put(run_notice(run, events, notify, found, changed))

    # -- the senders ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Start a sender for each lane with notices, until ``drain`` says stop and every lane
        is empty (or cancels it, and so its senders). It shares the broker's TaskGroup, so
        nothing it meets ends it: a fault is logged, and it goes on."""
        self._task = asyncio.current_task()
        try:
            async with asyncio.TaskGroup() as senders:
                while not self._stopping or not self.outbox.idle:
                    try:
                        self._look_for_silence()
                        for lane in self.outbox.ready():
                            senders.create_task(self._send_lane(lane))
                        due_s = None if self._stopping else self.silence.next_due_in_s()
                    except Exception as exc:
                        log.error("notify.sender_error", error=type(exc).__name__)
                        due_s = None
                    await self.outbox.wait(due_s)
        finally:
            with contextlib.suppress(Exception):
                await self.http.close()

    async def _send_lane(self, lane: Lane) -> None:
        """Send ``lane``'s notices in order until it is empty."""
        while (notice := self.outbox.take(lane)) is not None:
            event = notice.event_for(lane.target.on)
            if event is None:
                continue
            try:
                await self._deliver_one(lane.kind, lane.target, notice, event)
            except Exception as exc:
                self.outbox.dropped += 1
                log.error("notify.sender_error", error=type(exc).__name__)

    def _look_for_silence(self) -> None:
        for task, quiet_s in self.silence.newly_silent():
            log.warning("notify.silent", task=task, silent_for_s=round(quiet_s, 3))
            notify = self._configs.get(task)
            if notify is not None and notify.wants("silence"):
                self.outbox.put(Notice(("silence",), task, notify, silent_for_s=quiet_s))

    async def _deliver_one(
        self, kind: str, target: HttpTarget | CommandHook, notice: Notice, event: str
    ) -> None:
        try:
            delivery = await self._send(kind, target, notice, event)
        except Exception as exc:  # a sender's bug must not end the sender
            delivery = Delivery(False, 1, f"{type(exc).__name__}")
        url_from = target.url.source if isinstance(target, HttpTarget) else "tasks file"
        self.record.count(kind, notice, event, delivery, url_from)

    async def _send(
        self, kind: str, target: HttpTarget | CommandHook, notice: Notice, event: str
    ) -> Delivery:
        if isinstance(target, CommandHook):
            return await run_hook(self._children, target, notice, event)
        url = target.url.reveal()
        if kind == "webhook":
            body = orjson.dumps(document(notice, event))
            return await self.http.send(target, url, body, "application/json")
        body = tail_text(notice).encode("utf-8", "replace")[:TAIL_BYTES]
        return await self.http.send(target, ping_url(url, event), body, "text/plain; charset=utf-8")

    async def drain(self, timeout_s: float) -> None:
        """The shutdown's: what is pending gets ``timeout_s`` to go out, then is dropped (a
        command hook still running gets SIGTERM, and SIGKILL ``HOOK_GRACE_S`` later)."""
        self._stopping = True
        self.outbox.wake()
        task = self._task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
        if done:
            return
        in_flight = self.outbox.senders  # each has a notice in hand
        dropped = self.outbox.drop_all() + in_flight
        self.outbox.dropped += in_flight
        log.warning("notify.shutdown_dropped", dropped=dropped, waited_s=round(timeout_s, 3))
        task.cancel()  # a command hook in flight: SIGTERM, and SIGKILL after its grace
        await asyncio.wait({task}, timeout=HOOK_GRACE_S + CANCEL_SLACK_S)

    # -- what status, health and metrics read --------------------------------------------------
    @property
    def active(self) -> bool:
        """A task has notifications, or some were counted (a reload took them away since)."""
        return bool(self._configs or self.record.counted or self.outbox.dropped)

    def status(self) -> NotifyStatus | None:
        if not self.active:
            return None
        return {
            "tasks": len(self._configs),
            "capacity": self.outbox.capacity,
            "pending": len(self.outbox),
            "dropped": self.outbox.dropped,
            "retries": self.http.retries,
            "kinds": self.record.figures(),
            "last_failure": self.record.last_failure,
            "silent": self.silence.status(),
        }

    def health_warnings(self) -> list[str]:
        return self.silence.warnings()
