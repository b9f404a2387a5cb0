"""The production compose example (deploy/compose) on the real engine, set up as its header
says: file secrets (the database URL readable by uid 10001 only), two broker replicas, the
tasks file as a config. It comes up healthy, `exec` triggers a task with an allowed variable,
a database job runs, the secret appears nowhere in the containers' configuration, and `stop`
drains both replicas to exit 0 within their grace."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.container.conftest import Engine, wait_for_name
from tests.support.backends import REPO, ComposeCLI
from tests.support.eventually import eventually
from tests.support.podman_engine import RUNTIME_IMAGE

PROD_DIR = REPO / "deploy" / "compose"
PODMAN_PROD_OVERRIDE = REPO / "tests" / "container" / "compose.podman.prod.yml"
DAEMON_UID = 10001
SHUTDOWN_TIMEOUT_S = 25.0  # the broker's RUNBROKER_SHUTDOWN_TIMEOUT in that file


@dataclass
class Prod:
    engine: Engine
    cli: ComposeCLI
    env: dict[str, str]
    password: str

    def compose(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        argv = [str(self.engine.compose_bin), *self.cli.argv(*args)[2:]]
        return subprocess.run(
            argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )  # fmt: skip

    def ok(self, *args: str, timeout_s: float = 120.0) -> str:
        result = self.compose(*args, timeout_s=timeout_s)
        assert result.returncode == 0, f"compose {' '.join(args)}: {result.stderr}"
        return result.stdout

    def up(self, timeout_s: float) -> None:
        """``up --detach --wait``, then until every broker's DNS has settled (see
        ``wait_for_name``)."""
        self.ok("up", "--detach", "--wait", timeout_s=timeout_s)
        for container in _brokers(self):
            wait_for_name(self.engine, container)

    def runbroker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.compose(*self.cli.exec_argv("broker", *args)[len(self.cli.argv()) :])


@pytest.fixture(scope="module")
def prod(engine: Engine) -> Iterator[Prod]:
    work = Path(tempfile.mkdtemp(prefix="rbprod-", dir="/tmp"))
    try:
        for name in ("docker-compose.yml", "tasks.toml", "notify_receiver.py"):
            shutil.copyfile(PROD_DIR / name, work / name)
        # As the file's header says: owner-only secrets, the URL readable by the daemon's uid.
        store = work / "secrets"
        store.mkdir(mode=0o700)
        password = secrets.token_hex(24)
        (store / "postgres_password").write_text(password + "\n")
        url = store / "runbroker_database_url"
        url.write_text(f"postgresql://postgres:{password}@postgres:5432/runbroker")
        for path in store.iterdir():
            path.chmod(0o600)
        os.chown(url, DAEMON_UID, DAEMON_UID)
        store.chmod(0o755)
        project = f"rbct-{uuid.uuid4().hex[:10]}"
        cli = ComposeCLI(project, (work / "docker-compose.yml", PODMAN_PROD_OVERRIDE))
        env = {**engine.env, "RUNBROKER_IMAGE": RUNTIME_IMAGE}
        made = Prod(engine, cli, env, password)
        engine.health.watch(project)
        try:
            made.up(timeout_s=240)
            yield made
        finally:
            engine.health.forget(project)
            made.compose("down", "--volumes", "--remove-orphans", "--timeout", "5", timeout_s=180)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _brokers(prod: Prod) -> list[str]:
    return prod.ok("ps", "--all", "--quiet", "broker").split()


def test_two_replicas_come_up_healthy_reading_the_secret(prod: Prod) -> None:
    brokers = _brokers(prod)
    assert len(brokers) == 2
    for container in brokers:
        inspect = prod.engine.inspect(container)
        assert inspect["State"]["Health"]["Status"] == "healthy"
        # The URL reaches the daemon as a file it reads; it is in no container setting.
        assert prod.password not in json.dumps(inspect)
        status = prod.engine.run(["podman", "exec", container, "runbroker", "status", "--json"])
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["database"]["up"] is True


def test_exec_triggers_a_task_with_an_allowed_variable(prod: Prod) -> None:
    result = prod.runbroker("trigger", "report", "--env", "REPORT_DAY=monday")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["report for monday"]
    refused = prod.runbroker("trigger", "report", "--env", "OTHER=1")
    assert refused.returncode != 0
    assert "report for" not in refused.stdout


def test_a_database_job_runs_and_stop_drains_both_replicas(prod: Prod) -> None:
    added = prod.runbroker("jobs", "add", "once", "--task", "default", "--at", "now")
    assert added.returncode == 0, added.stderr

    def ran() -> bool:
        history = prod.runbroker("jobs", "history", "once", "--json")
        assert history.returncode == 0, history.stderr
        return [run["status"] for run in json.loads(history.stdout)["runs"]] == ["succeeded"]

    eventually(ran, "the database job to succeed", timeout_s=60)
    started = time.monotonic()
    prod.ok("stop", "--timeout", "40", "broker", timeout_s=120)
    elapsed = time.monotonic() - started
    assert elapsed < SHUTDOWN_TIMEOUT_S
    for container in _brokers(prod):
        state = prod.engine.inspect(container)["State"]
        assert state["Status"] == "exited"
        assert state["ExitCode"] == 0
