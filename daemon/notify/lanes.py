"""The notifications' targets, each a lane with a sender of its own, so that a dead or slow
endpoint delays only its own notices (as alerting peers send to each receiver on its own).

A lane is one target (a webhook, a ping URL or a command; the ``[notify]`` defaults are one
target, one lane, for every task they reach) and its bounded ``Outbox``, found by the target's
identity (a hash of its fields would cost microseconds at each notice; the lane holds its
target, so the identity is not reused while it lives). ``put`` (the executor's side: bounded,
never waits) queues a notice in each lane whose target hears it; the notifier's task starts a
sender for each lane that has notices and none (``ready``), and a sender ends when its lane is
empty, which is then forgotten: the lanes are the targets with notices. All of them together
hold at most ``NOTICES_MAX`` notices: past it the longest lane (a dead target's, not a live
one's) loses its oldest, counted as dropped. At most ``SENDERS_MAX`` send at once (each holds
a notice, and an HTTP one a connection), so whatever the tasks file, the notices and
connections held are bounded; a lane beyond waits its turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from daemon.core.tasks.notify_targets import KINDS, CommandHook, HttpTarget
from daemon.notify.notice import Notice
from daemon.notify.outbox import OUTBOX_CAPACITY, Outbox

NOTICES_MAX = 1000  # every target's queue together: about 10 MiB at the tail's bounds
SENDERS_MAX = 256  # targets sending at once: so many dead ones at once delay the others

Target = HttpTarget | CommandHook


@dataclass(eq=False, slots=True)
class Lane:
    kind: str
    target: Target
    outbox: Outbox
    sending: bool = False  # a sender has it (from ``ready`` until ``take`` finds it empty)

    @property
    def key(self) -> int:
        return id(self.target)


class Lanes:
    def __init__(
        self,
        capacity: int = OUTBOX_CAPACITY,
        capacity_all: int = NOTICES_MAX,
        senders_max: int = SENDERS_MAX,
    ) -> None:
        self.capacity = capacity  # each target's
        self.capacity_all = max(capacity, capacity_all)
        self.senders_max = senders_max
        self.senders = 0  # lanes with a sender (each with a notice in hand, or about to end)
        self._lanes: dict[int, Lane] = {}  # by the target's id
        self._ready: dict[int, Lane] = {}  # notices and no sender, in the order they came
        self._changed = asyncio.Event()
        self.pending = 0
        self.dropped = 0

    def put(self, notice: Notice) -> None:
        """Queue ``notice`` for each target that hears it: O(targets), never blocks."""
        for kind, target in zip(KINDS, notice.notify.targets(), strict=True):
            if target is None or notice.event_for(target.on) is None:
                continue
            key = id(target)
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = Lane(kind, target, Outbox(kind, self.capacity))
            dropped = lane.outbox.put(notice)
            self.pending += 1 - dropped
            self.dropped += dropped
            if not lane.sending:
                self._ready[key] = lane
        while self.pending > self.capacity_all:
            longest = max(self._lanes.values(), key=lambda lane: len(lane.outbox))
            dropped = longest.outbox.drop_oldest(f"all targets' queues hold {self.capacity_all}")
            if not dropped:
                break
            self.pending -= dropped
            self.dropped += dropped
        self._changed.set()

    def ready(self) -> list[Lane]:
        """The lanes with notices and no sender, first come first, as many as may send now;
        each is now the caller's to send."""
        lanes = []
        while self._ready and self.senders < self.senders_max:
            key = next(iter(self._ready))
            lane = self._ready.pop(key)
            lane.sending = True
            self.senders += 1
            lanes.append(lane)
        return lanes

    def take(self, lane: Lane) -> Notice | None:
        """``lane``'s oldest notice; None: it is empty, its sender ends and it is forgotten."""
        notice = lane.outbox.take()
        if notice is not None:
            self.pending -= 1
            return notice
        lane.sending = False
        self.senders -= 1
        if self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]
        self._changed.set()
        return None

    @property
    def idle(self) -> bool:
        """Nothing pending and no sender."""
        return self.pending == 0 and self.senders == 0

    async def wait(self, timeout_s: float | None) -> None:
        """Until a notice is put or a sender ends (or ``timeout_s`` passes)."""
        if self._ready and self.senders < self.senders_max:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._changed.wait()
        except TimeoutError:
            pass
        self._changed.clear()

    def wake(self) -> None:
        """Wake the notifier's task without a notice (a stop, a reload's new silences)."""
        self._changed.set()

    def drop_all(self) -> int:
        """Drop every pending notice (the end of a shutdown's time for them); how many."""
        count = sum(lane.outbox.drop_all() for lane in self._lanes.values())
        self._ready.clear()
        self.pending = 0
        self.dropped += count
        return count

    def __len__(self) -> int:
        return self.pending
