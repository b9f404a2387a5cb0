"""Acceptance: lease fencing holds whatever happens to one daemon process alone. Replica A's
daemon is stopped (SIGSTOP), or its event loop is blocked, while its database run goes on; the
run's process group is killed (by A's watchdog) before the lease can expire, so replica B,
which reclaims the occurrence once the lease has expired, never runs it at the same time. A
hung database link is tests/acceptance/test_lease_fencing.py.

The proof is in the jobs' own side effects, as there: each run appends a timestamped line to a
shared ledger every 50 ms and ignores SIGTERM.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from tests.support.eventually import eventually
from tests.support.harness import Daemon, Workdir
from tests.support.pgsupport import jobs, ledger_task, query, read_ledger, value

LEASE_S = 4.0
GRACE_S = 1.0
TASKS = (
    ledger_task(8)
    + """
[tasks.noop]
handler = "loop_blocker:noop"
"""
)
# Imported with the tasks file: this signal makes the daemon's event loop sleep (a callback
# that blocks the loop, as a careless handler's would).
BLOCK_S = 12
BLOCKER = f"""
import signal
import time

def _block(_signum, _frame):
    time.sleep({BLOCK_S})

signal.signal(signal.SIGRTMIN + 3, _block)

async def noop(run):
    return None
"""


def _stall_replica_a(
    dsn: str, stall: Callable[[Daemon], None], resume: Callable[[Daemon], None]
) -> None:
    work_a, work_b, shared = Workdir(), Workdir(), Workdir()
    ledger = shared.path / "ledger"
    ledger.touch()
    (shared.path / "loop_blocker.py").write_text(BLOCKER)
    common = {
        "RUNBROKER_LEASE": f"{LEASE_S:g}s",
        "RUNBROKER_GRACE": f"{GRACE_S:g}s",
        "RUNBROKER_DATABASE_URL": dsn,
        "LEDGER": str(ledger),
        "PYTHONPATH": str(shared.path),
    }
    started: list[Daemon] = []
    try:
        a = Daemon(work_a.path, env={**common, "REPLICA": "a"}, tasks_toml=TASKS)
        started.append(a)
        a.log.wait_for("pgrunner.started")
        jobs(dsn, "add", "nightly", "--task", "exclusive", "--at", "now", "--max-attempts", "3")
        eventually(lambda: "a" in read_ledger(ledger), "replica a's run to start")
        b = Daemon(work_b.path, env={**common, "REPLICA": "b"}, tasks_toml=TASKS)
        started.append(b)
        b.log.wait_for("pgrunner.started")

        stall(a)
        stalled_at = time.time()
        eventually(
            lambda: value(dsn, "SELECT last_status FROM scheduled_jobs"),
            "the occurrence to complete on replica b",
            until=lambda status: status == "succeeded",
            timeout_s=60,
        )
        seen = read_ledger(ledger)
        a_last, b_first = max(seen["a"]), min(seen["b"])
        assert a_last < b_first, f"the runs overlapped: a until {a_last}, b from {b_first}"
        assert a_last < stalled_at + LEASE_S  # killed within the lease of its last renewal
        assert max(seen["b"]) - b_first > 6  # b ran the job to its end
        runs = query(dsn, "SELECT attempt, status, owner FROM job_runs ORDER BY attempt")
        assert runs[-1]["status"] == "succeeded"
        assert runs[-1]["owner"] != runs[0]["owner"]

        resume(a)  # a wakes to find its run killed, and says why
        (killed,) = a.log.wait_for("job.watchdog_killed", timeout_s=30)
        assert killed["run_id"]
    finally:
        for daemon in started:
            daemon.stop()
        for work in (work_a, work_b, shared):
            work.cleanup()


def test_a_stopped_daemons_run_is_killed_before_another_replica_can_take_it(dsn: str) -> None:
    _stall_replica_a(
        dsn,
        lambda daemon: daemon.signal(signal.SIGSTOP),  # the daemon alone: not its job
        lambda daemon: daemon.signal(signal.SIGCONT),
    )


def test_a_blocked_event_loops_run_is_killed_before_another_replica_can_take_it(
    dsn: str,
) -> None:
    _stall_replica_a(
        dsn,
        lambda daemon: daemon.signal(signal.SIGRTMIN + 3),
        lambda _daemon: None,  # the loop goes on by itself after BLOCK_S
    )
