"""Acceptance: lease fencing. A replica cut off from PostgreSQL stops its run before the lease
it can no longer renew expires, so the replica that reclaims the occurrence never runs it at
the same time, and the occurrence still completes there.

The cut is a real partition, not a refused connection: replica A reaches the database through
a proxy that stops passing bytes (its queries hang until its own timeouts give up). The proof
is in the jobs' own side effects: each run appends a timestamped line to a shared ledger every
50 ms, and ignores SIGTERM, so only the SIGKILL at the end of its grace stops it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.acceptance.tcpproxy import PartitionableProxy
from tests.support.eventually import eventually
from tests.support.harness import Daemon, Workdir
from tests.support.pgsupport import jobs, ledger_task, query, read_ledger, value

LEASE_S = 4.0
GRACE_S = 1.0
TASKS = ledger_task(7)


def _through(dsn: str, proxy: PartitionableProxy) -> str:
    """``dsn`` with its host and port replaced by the proxy's (user and password kept)."""
    parts = urlsplit(dsn)
    userinfo, at, _host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{proxy.address()}"))


@pytest.fixture
def proxy(dsn: str) -> Iterator[PartitionableProxy]:
    parts = urlsplit(dsn)
    through = PartitionableProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        yield through
    finally:
        through.close()


def test_a_partitioned_replica_stops_its_run_before_another_can_take_it(
    dsn: str, proxy: PartitionableProxy
) -> None:
    work_a, work_b, shared = Workdir(), Workdir(), Workdir()
    ledger = shared.path / "ledger"
    ledger.touch()
    common = {"RUNBROKER_LEASE": f"{LEASE_S:g}s", "RUNBROKER_GRACE": f"{GRACE_S:g}s"}
    started: list[Daemon] = []
    try:
        a = Daemon(
            work_a.path,
            env={
                **common,
                "RUNBROKER_DATABASE_URL": _through(dsn, proxy),
                "REPLICA": "a",
                "LEDGER": str(ledger),
            },
            tasks_toml=TASKS,
        )
        started.append(a)
        a.log.wait_for("pgrunner.started")
        jobs(dsn, "add", "nightly", "--task", "exclusive", "--at", "now", "--max-attempts", "3")
        eventually(lambda: "a" in read_ledger(ledger), "replica a's run to start")

        b = Daemon(
            work_b.path,
            env={**common, "RUNBROKER_DATABASE_URL": dsn, "REPLICA": "b", "LEDGER": str(ledger)},
            tasks_toml=TASKS,
        )
        started.append(b)
        b.log.wait_for("pgrunner.started")

        proxy.partition()
        cut_at = time.time()
        (fenced,) = a.log.wait_for("job.fenced", timeout_s=LEASE_S * 3)
        assert fenced["job"] == "nightly"
        eventually(
            lambda: value(dsn, "SELECT last_status FROM scheduled_jobs"),
            "the occurrence to complete on replica b",
            until=lambda status: status == "succeeded",
            timeout_s=60,
        )
        runs = query(dsn, "SELECT attempt, status, owner, error FROM job_runs ORDER BY attempt")
        assert [(r["attempt"], r["status"]) for r in runs] == [(1, "abandoned"), (2, "succeeded")]
        assert runs[1]["owner"] != runs[0]["owner"]

        seen = read_ledger(ledger)
        a_last, b_first = max(seen["a"]), min(seen["b"])
        assert a_last < b_first, f"the runs overlapped: a until {a_last}, b from {b_first}"
        # a stopped within the lease of its last renewal (at most the cut), grace included
        assert a_last < cut_at + LEASE_S
        # b ran the job to its end: it runs until the clock's second 7 s after its start (so 6 to
        # 7 s, less its first line's moment); a fence would have cut it within LEASE_S
        assert max(seen["b"]) - b_first > LEASE_S + 1

        proxy.heal()  # a records what it knows once it can: its late result is refused
        a.log.wait_for("job.lease_lost", timeout_s=60)
    finally:
        for daemon in started:
            daemon.stop()
        for work in (work_a, work_b, shared):
            work.cleanup()
