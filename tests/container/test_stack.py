"""The compose stack of docker-compose.yml on the real engine: postgres, the one-shot migrate
and the broker come up healthy; a scheduled database job runs in it; two replicas run each
occurrence once; ``docker compose run tests`` (a selection of the integration and acceptance
tiers inside the test image, against the stack's database) passes."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from tests.container.conftest import Stack
from tests.support.eventually import eventually
from tests.support.pgsupport import query, value

TESTS_RUN_TIMEOUT_S = 300.0
# What the stack's test service must prove, not the whole tiers again (the main run has
# them on the host): see test_compose_run_tests_passes.
RUNNER_TESTS = "tests/acceptance/test_postgres_runner.py::"
TESTS_SELECTION = (
    "tests/integration/test_pg_store.py",
    "tests/acceptance/test_broker.py",
    f"{RUNNER_TESTS}test_a_killed_replicas_run_is_abandoned_and_retried_on_another",
    f"{RUNNER_TESTS}test_database_restart_mid_run_is_survived_and_the_result_recorded",
    "tests/acceptance/test_lease_fencing.py",
)


def _json_lines(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def _health(stack: Stack, service: str) -> str:
    state = stack.engine.inspect(stack.container(service))["State"]
    return str(state["Health"]["Status"])


def _owner(stack: Stack, service: str) -> str:
    """The lease owner a broker writes into its runs, as its ``status --json`` tells."""
    status = stack.exec(service, "status", "--json")
    assert status.returncode == 0, status.stderr
    return str(json.loads(status.stdout)["database"]["owner"])


def test_the_stack_comes_up_healthy_and_migrated(stack: Stack) -> None:
    assert _health(stack, "postgres") == "healthy"
    assert _health(stack, "broker") == "healthy"
    migrate = stack.engine.inspect(stack.container("migrate"))["State"]
    assert migrate["Status"] == "exited"
    assert migrate["ExitCode"] == 0
    assert value(stack.dsn(), "SELECT count(*) FROM scheduled_jobs") is not None
    # The broker is the daemon of the image: PID 1, connected to the stack's database.
    status = stack.exec("broker", "status", "--json")
    assert status.returncode == 0, status.stderr
    database = json.loads(status.stdout)["database"]
    assert database["up"] is True
    assert database["listening"] is True


def test_a_scheduled_database_job_runs_in_the_stack(stack: Stack) -> None:
    name = f"stack-{uuid.uuid4().hex[:8]}"
    added = stack.exec("broker", "jobs", "add", name, "--task", "default", "--at", "now")
    assert added.returncode == 0, added.stderr
    dsn = stack.dsn()
    eventually(
        lambda: (
            value(dsn, "SELECT last_status FROM scheduled_jobs WHERE name = $1", name)
            == "succeeded"
        ),
        "the database job to run",
    )
    runs = query(
        dsn,
        "SELECT r.status, r.attempt, r.owner FROM job_runs r"
        " JOIN scheduled_jobs j ON j.id = r.job_id WHERE j.name = $1",
        name,
    )
    assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]
    assert runs[0]["owner"] == _owner(stack, "broker")
    history = stack.exec("broker", "jobs", "history", name, "--json")
    assert history.returncode == 0, history.stderr
    assert [run["status"] for run in json.loads(history.stdout)["runs"]] == ["succeeded"]


def test_two_replicas_run_each_occurrence_exactly_once(stack: Stack) -> None:
    # --no-recreate: compose 2.40 on podman 4.3 recreates postgres on every `up` that
    # includes it (something of podman's container inspect differs from what compose expects),
    # which would restart the database under the running broker. --no-deps: the stack is up,
    # and a rerun of the one-shot migrate is container churn, which makes podman's DNS server
    # (aardvark-dns 1.4) reload and drop queries for seconds.
    stack.up("--no-recreate", "--no-deps", "broker-2", timeout_s=180)
    assert _health(stack, "broker-2") == "healthy"
    dsn = stack.dsn()
    names = [f"replica-{uuid.uuid4().hex[:6]}-{n}" for n in range(4)]
    for name in names:
        added = stack.exec("broker", "jobs", "add", name, "--task", "default", "--every", "1s")
        assert added.returncode == 0, added.stderr
    count_sql = (
        "SELECT count(*) FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id"
        " WHERE j.name = ANY($1::text[]) AND r.status = 'succeeded'"
    )
    eventually(lambda: value(dsn, count_sql, names) >= 24, "24 occurrences to run", timeout_s=60)
    for name in names:
        disabled = stack.exec("broker", "jobs", "disable", name)
        assert disabled.returncode == 0, disabled.stderr
    # Nothing of these jobs is left running or queued once both replicas are idle.
    eventually(
        lambda: (
            value(
                dsn,
                "SELECT count(*) FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id"
                " WHERE j.name = ANY($1::text[]) AND r.status IN ('queued', 'running')",
                names,
            )
            == 0
        ),
        "the last runs to finish",
    )
    rows = query(
        dsn,
        "SELECT j.name, r.scheduled_for, r.attempt, r.status, r.owner FROM job_runs r"
        " JOIN scheduled_jobs j ON j.id = r.job_id WHERE j.name = ANY($1::text[])",
        names,
    )
    occurrences = Counter((r["name"], r["scheduled_for"]) for r in rows)
    assert max(occurrences.values()) == 1, "an occurrence was claimed twice"
    assert {r["status"] for r in rows} == {"succeeded"}
    # What the replicas really ran, from their own logs: one run per recorded occurrence.
    done: Counter[tuple[str, str]] = Counter()
    services = {_owner(stack, service): service for service in ("broker", "broker-2")}
    assert len(services) == 2
    for service in services.values():
        container = stack.container(service)
        result = stack.engine.run(["podman", "logs", container])
        for line in _json_lines(result.stdout):
            if line.get("event") == "run.done" and line.get("job") in names:
                done[(line["job"], service)] += 1
    assert {r["owner"] for r in rows} <= set(services), "a run owned by neither replica"
    recorded = Counter((r["name"], services[r["owner"]]) for r in rows)
    assert done == recorded
    print(f"runs per replica: {Counter(services[r['owner']] for r in rows)}")


@pytest.mark.timeout(TESTS_RUN_TIMEOUT_S + 60)
def test_compose_run_tests_passes(stack: Stack) -> None:
    """``docker compose run tests`` with TESTS_SELECTION, in the privileged test container,
    against the stack's PostgreSQL. The main run has both tiers on the host, so this runs what
    only this container shows, once each: the test image runs the suite; the store's
    integration tests reach the stack's server through RUNBROKER_TEST_DSN; test_broker.py
    makes daemons PID 1 of PID namespaces (unshare) and enters them (nsenter, setpriv), which
    needs the privileges; two of test_postgres_runner.py's tests run PID-1 replicas on that
    server, one killed, and restart it the only way a server elsewhere can be
    (pgsupport.restart_server); test_lease_fencing.py partitions a proxy to it, found by name
    on the container network.
    The compose file's default command stays both whole tiers, for users. docker-compose exits
    0 whatever the container did, so the container's own exit code is read."""
    name = f"{stack.project}-tests"
    started = time.monotonic()
    result = stack.compose(
        "run", "--name", name, "tests", *TESTS_SELECTION, timeout_s=TESTS_RUN_TIMEOUT_S
    )
    try:
        state = stack.engine.inspect(name)["State"]
        output = stack.engine.run(["podman", "logs", name]).stdout
    finally:
        stack.engine.run(["podman", "rm", "--force", name])
    summary = [line for line in output.splitlines() if " passed" in line or " failed" in line]
    assert state["ExitCode"] == 0, f"{result.stderr}\n{output[-6000:]}"
    assert summary, output[-3000:]
    assert " failed" not in summary[-1], summary[-1]
    print(f"compose run tests: {summary[-1].strip()} in {time.monotonic() - started:.0f} s")
