"""The watchdog process: ends the jobs' process groups when the daemon itself cannot.

A process of its own, so that fencing holds whatever happens to the daemon (stopped, its loop
blocked, its database link hung). Standard library only: it imports nothing of the daemon.
It reads a line per fact on its stdin, and kills every group it knows at the end of it:

- ``W PGID [KEY]``: a job's process group was started (KEY: its run id);
- ``D KEY AT``: KEY's group is SIGKILLed at AT (CLOCK_MONOTONIC s), answered ``K KEY PGID``;
- ``F KEY``: KEY has no deadline any more.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

PROBE_S = 0.25  # how often a group whose leader has exited is looked for
READ_BYTES = 64 * 1024


def _kill(pgid: int, signum: int) -> bool:
    """Signal the group. False when it has no member left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Watch:
    def __init__(self, requests: int, answers: int) -> None:
        self.requests = requests  # the daemon's lines
        self.answers = answers
        self.partial = b""  # a line not ended yet
        self.poller = select.poll()
        self.poller.register(requests, select.POLLIN)
        self.keys: dict[int, str] = {}  # live group -> its run id ("" for none)
        self.pgids: dict[str, int] = {}  # run id -> its live group
        self.pidfds: dict[int, int] = {}  # the leader's pidfd -> its group
        self.leaderless: set[int] = set()  # groups whose leader has exited
        self.deadlines: dict[str, float] = {}  # run id -> when its group must be gone

    def watch(self, pgid: int, key: str) -> None:
        self.keys[pgid] = key
        if key:
            self.pgids[key] = pgid
        try:
            pidfd = os.pidfd_open(pgid)
        except OSError:
            self.leaderless.add(pgid)  # already gone (and collected): probed at once
        else:
            self.pidfds[pidfd] = pgid
            self.poller.register(pidfd, select.POLLIN)

    def handle_lines(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            self.handle(line)

    def handle(self, message: bytes) -> None:
        kind, *fields = message.decode("ascii", "replace").split(" ")
        if kind == "W" and fields:
            self.watch(int(fields[0]), fields[1] if len(fields) > 1 else "")
        elif kind == "D" and len(fields) == 2:
            self.deadlines[fields[0]] = float(fields[1])
        elif kind == "F" and fields:
            self.deadlines.pop(fields[0], None)

    def leader_exited(self, pidfd: int) -> None:
        self.poller.unregister(pidfd)
        os.close(pidfd)
        self.leaderless.add(self.pidfds.pop(pidfd))

    def drop_empty_groups(self) -> None:
        for pgid in list(self.leaderless):
            if not _kill(pgid, 0):
                self.leaderless.discard(pgid)
                key = self.keys.pop(pgid, "")
                if self.pgids.get(key) == pgid:
                    del self.pgids[key]

    def kill_overdue(self, now: float) -> None:
        for key, at in list(self.deadlines.items()):
            pgid = self.pgids.get(key)
            if pgid is not None and at <= now:
                del self.deadlines[key]
                _kill(pgid, signal.SIGKILL)
                self.tell(f"K {key} {pgid}")

    def tell(self, text: str) -> None:
        with contextlib.suppress(OSError):  # gone (its end of file comes next), or not reading
            os.write(self.answers, f"{text}\n".encode("ascii"))

    def timeout_ms(self, now: float) -> int | None:
        waits = [at - now for key, at in self.deadlines.items() if key in self.pgids]
        if self.leaderless:
            waits.append(PROBE_S)
        if not waits:
            return None
        return max(0, int(min(waits) * 1000) + 1)

    def kill_all(self) -> None:
        for pgid in self.keys:
            _kill(pgid, signal.SIGKILL)

    def serve(self) -> None:
        while True:
            for fd, _events in self.poller.poll(self.timeout_ms(time.monotonic())):
                if fd != self.requests:
                    self.leader_exited(fd)
                    continue
                data = os.read(self.requests, READ_BYTES)
                if not data:
                    self.kill_all()  # the daemon has ended: no job outlives it
                    return
                self.handle_lines(data)
            self.kill_overdue(time.monotonic())
            self.drop_empty_groups()


def main() -> None:
    # Its own process group already, so a terminal's ^C does not reach it. Only its stdin's end
    # ends it: a signal meant for the daemon's group must not leave the jobs unguarded.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    os.set_blocking(1, False)  # a stalled daemon that reads no answers must not stall it too
    Watch(0, 1).serve()


if __name__ == "__main__":
    main()
