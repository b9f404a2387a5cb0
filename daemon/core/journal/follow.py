"""How a follower of a run's log holds the run's output back while it is far behind.

The journal keeps a run's newest lines within a bound: a follower (a ``runbroker logs -f``
client) that falls so far behind that the next trims would drop lines it has not read holds
the run's output back (``OutputFlow``: the job's pipes are not read) until it has caught up,
for at most the flow's bound; let go, it holds nothing more until it has caught up, and what
the bound drops before it got there is counted as it always was.
"""

from __future__ import annotations

from daemon.core.journal.ring import RunLog
from daemon.core.runqueue.flow import OutputFlow


class FollowerHold:
    """One follower's hold: taken past half the kept lines behind, released within a quarter."""

    __slots__ = ("holding", "let_go")

    def __init__(self) -> None:
        self.holding: OutputFlow | None = None  # the run's flow, while this follower holds it
        self.let_go = False  # held too long: holds nothing more until it has caught up

    def check(self, log: RunLog, seq: int) -> None:
        """The follower's next line is ``seq``: hold the run back, or let it go on.

        Held past half the kept lines behind, with the buffer at least half full: the lines a
        trim drops (down to seven eighths of the bound) are then older than its position,
        with a read or two of the job's pipe to spare before the hold takes effect."""
        behind, kept = log.end_seq - seq, log.line_count
        if behind * 4 <= kept or log.result is not None:
            self.let_go = False
            self.release()
        elif (
            behind * 2 > kept
            and log.bytes * 2 >= log.bytes_max
            and self.holding is None
            and not self.let_go
            and log.flow is not None
            and log.flow.hold(self._let_go)
        ):
            self.holding = log.flow

    def release(self) -> None:
        flow, self.holding = self.holding, None
        if flow is not None:
            flow.release(self._let_go)

    def _let_go(self) -> None:
        self.holding = None
        self.let_go = True
