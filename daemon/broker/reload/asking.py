"""Clients' reload requests (``runbroker reload``, ``reload --dry-run``), waiting their turn.

A reload may take seconds (its check runs off the event loop), so a request is answered later:
its answer is a future the connection writes when it is set, and the reload loop
(``waking.reload_forever``) takes the requests one at a time, between the reloads the watch and
SIGHUP wake, so that no two reloads ever overlap. A dry run whose client has gone is dropped;
a reload asked for is made even so, as a trigger's run goes on without its client.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.wire.control_answers import reload_answer, reload_plan_answer
from daemon.wire.protocol import ReloadRequest
from daemon.wire.reasons import CODE_SHUTTING_DOWN, REASON_CLOSED

Answer = asyncio.Future[Mapping[str, Any]]


@dataclass(frozen=True)
class Asked:
    request: ReloadRequest
    answer: Answer

    def wanted(self) -> bool:
        """Still worth doing: a dry run nobody waits for is not."""
        return not (self.answer.done() and self.request.dry_run)

    def give(self, answer: Mapping[str, Any]) -> None:
        if not self.answer.done():  # the client has gone
            self.answer.set_result(answer)


class ReloadRequests:
    def __init__(self) -> None:
        self._waiting: collections.deque[Asked] = collections.deque()
        self.arrived = asyncio.Event()  # set while a request waits
        self.current: Asked | None = None  # the one being answered
        self.closed = False

    def ask(self, request: ReloadRequest) -> Answer:
        """The future answer of ``request``, which waits its turn; the connection cancels it
        when its client goes."""
        answer: Answer = asyncio.get_running_loop().create_future()
        if self.closed:
            answer.set_result(closed_answer(request))
            return answer
        if self._waiting:  # abandoned dry runs never pile up
            self._waiting = collections.deque(a for a in self._waiting if a.wanted())
        self._waiting.append(Asked(request, answer))
        self.arrived.set()
        return answer

    def take(self) -> Asked | None:
        """The next request still wanted, now the current one (None: none waits)."""
        self.current = None
        while self._waiting:
            asked = self._waiting.popleft()
            if asked.wanted():
                self.current = asked
                break
        if not self._waiting:
            self.arrived.clear()
        return self.current

    def close(self) -> None:
        """The daemon stops: every request not answered yet is told so, and new ones too."""
        self.closed = True
        for asked in [*([self.current] if self.current else []), *self._waiting]:
            asked.give(closed_answer(asked.request))
        self._waiting.clear()
        self.current = None
        self.arrived.clear()


def closed_answer(request: ReloadRequest) -> dict[str, Any]:
    """The answer of a request the stopping daemon will not make (``shutting_down``: 75)."""
    if request.dry_run:
        return reload_plan_answer(False, REASON_CLOSED, code=CODE_SHUTTING_DOWN)
    return reload_answer(False, REASON_CLOSED, None, CODE_SHUTTING_DOWN)
