"""How a follower of a run's log holds the run's output back rather than lose lines.

A follower whose unread lines a trim would drop holds the output back instead, within the
flow's bound, so a follower that keeps up loses nothing and one that stopped cannot hold the
run for long.
"""

from __future__ import annotations

from daemon.core.process.flow import OutputFlow


class FollowerHold:
    """One follower's place in a run's log (``seq``: the next line it reads) and its hold."""

    __slots__ = ("holding", "let_go", "seq")

    def __init__(self) -> None:
        self.seq = 0
        self.holding: OutputFlow | None = None  # the run's flow, while this follower holds it
        self.let_go = False  # held too long: holds nothing more until it has caught up

    def take(self, flow: OutputFlow | None) -> bool:
        """A trim would drop lines this follower has not read: hold the run back (True), or
        say it may not (let go, or nothing can be held: no job, or holding is off)."""
        if self.holding is not None:
            return True
        if self.let_go or flow is None or not flow.hold(self._let_go):
            return False
        self.holding = flow
        return True

    def caught_up(self) -> None:
        """The follower has read about all there is: the run goes on, and it may hold again."""
        self.let_go = False
        self.release()

    def release(self) -> None:
        flow, self.holding = self.holding, None
        if flow is not None:
            flow.release(self._let_go)

    def _let_go(self) -> None:
        self.holding = None
        self.let_go = True
