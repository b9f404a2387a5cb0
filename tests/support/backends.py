"""Where the acceptance suite's daemons run, chosen by ``RUNBROKER_TEST_BACKEND``.

``local`` (the default): ``harness.Daemon``, the daemon as PID 1 of a new PID namespace
(``unshare``), clients entering it with ``nsenter`` exactly as ``docker exec`` does, the local
PostgreSQL. Runs anywhere the suite runs as root, including the privileged ``tests`` service of
docker-compose.yml.

``compose``: each daemon is its own compose project made from the ``daemon`` service of
docker-compose.yml (the runtime image, read-only, non-root, tmpfs socket directory) plus a
generated override file (the test's command, environment and tasks file); clients run
``docker compose exec -T daemon runbroker ...``; signals, exit status and logs go through
``docker kill``, ``docker wait`` and ``docker logs`` on its container. The running
stack's broker is reached with ``docker compose exec -T broker runbroker ...``
(``ComposeBackend.broker_argv``). It needs an engine on this Linux host: the test's work
directory is bind-mounted at the same path (tests create files there and connect to the socket
in it) and the daemon's host pid is read for /proc checks. An engine that needs more than
docker-compose.yml gets its override files from ``RUNBROKER_TEST_COMPOSE_OVERRIDES``. The
container tier (tests/container) runs this backend on podman; tests/static checks the files it
generates and its command lines without an engine.

The fixtures use ``get_backend().start(...)``; both backends return a ``DaemonHandle``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, Unpack

from tests.support.harness import (
    WAIT_S,
    Daemon,
    LogTail,
    StartOptions,
    close_pipes,
    follow_log,
    open_client,
    run_client,
    zombies_in_pid_namespace_of,
)

BACKEND_ENV = "RUNBROKER_TEST_BACKEND"
# Override files added after docker-compose.yml, separated by os.pathsep: what an engine other
# than Docker needs (podman: tests/container/compose.podman.yml, set by the container tier).
COMPOSE_OVERRIDES_ENV = "RUNBROKER_TEST_COMPOSE_OVERRIDES"
REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DAEMON_SERVICE = "daemon"  # per-test daemons (profile "backend")
BROKER_SERVICE = "broker"  # the stack's long-running broker
COMPOSE_PROFILE = "backend"
DAEMON_UID = 10001  # the image's USER; the daemon binds its socket in the work directory


class DaemonHandle(Protocol):
    """What a test may do with a daemon, whichever backend runs it."""

    workdir: Path
    socket: Path
    pid: int  # the daemon's pid as this host sees it (PID 1 inside its own namespace)
    log: LogTail

    def exec_argv(self, *args: str, as_user: str | None = None) -> list[str]:
        """argv that runs ``runbroker ARGS`` inside the daemon's container or namespace."""
        ...

    def exec(
        self, *args: str, as_user: str | None = None, timeout_s: float = WAIT_S
    ) -> subprocess.CompletedProcess[str]: ...

    def popen(self, *args: str) -> subprocess.Popen[str]: ...

    def signal(self, signum: int) -> None: ...

    def wait(self, timeout_s: float = WAIT_S) -> int: ...

    def stderr(self) -> str: ...

    def stop(self) -> None: ...

    def zombies(self) -> list[str]: ...


class Backend(Protocol):
    name: str

    def start(
        self, workdir: Path, command: Sequence[str] = (), **options: Unpack[StartOptions]
    ) -> DaemonHandle: ...


class LocalBackend:
    name = "local"

    def start(
        self, workdir: Path, command: Sequence[str] = (), **options: Unpack[StartOptions]
    ) -> DaemonHandle:
        return Daemon(workdir, command, **options)


def compose_files(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """docker-compose.yml and the overrides ``RUNBROKER_TEST_COMPOSE_OVERRIDES`` names."""
    env = os.environ if environ is None else environ
    extra = [Path(part) for part in env.get(COMPOSE_OVERRIDES_ENV, "").split(os.pathsep) if part]
    return (COMPOSE_FILE, *extra)


class ComposeCLI:
    """The ``docker compose`` command lines of one project (nothing runs until asked)."""

    def __init__(self, project: str, files: Sequence[Path], profiles: Sequence[str] = ()) -> None:
        self.project = project
        self.files = tuple(files)
        self.profiles = tuple(profiles)

    def argv(self, *args: str) -> list[str]:
        argv = ["docker", "compose", "--project-name", self.project]
        for path in self.files:
            argv += ["--file", str(path)]
        for profile in self.profiles:
            argv += ["--profile", profile]
        return [*argv, *args]

    def exec_argv(self, service: str, *args: str, as_user: str | None = None) -> list[str]:
        user = ["--user", as_user] if as_user is not None else []
        return self.argv("exec", "-T", *user, service, "runbroker", *args)

    def up_argv(self, service: str) -> list[str]:
        return self.argv("up", "--detach", "--no-deps", "--quiet-pull", service)

    def container_id_argv(self, service: str) -> list[str]:
        return self.argv("ps", "--all", "--quiet", service)

    def down_argv(self) -> list[str]:
        return self.argv("down", "--volumes", "--remove-orphans", "--timeout", "0")


def daemon_environment(
    workdir: Path, env: Mapping[str, str] | None, tasks_file: Path | None
) -> dict[str, str]:
    """The daemon's environment, as the local harness gives it (nothing of the test's own)."""
    result = {
        "RUNBROKER_SOCKET": str(workdir / "rb.sock"),
        "RUNBROKER_LOG_FORMAT": "json",
        "RUNBROKER_INTERVAL": "off",
        "PYTHONUNBUFFERED": "1",
    }
    if tasks_file is not None:
        result["RUNBROKER_TASKS_FILE"] = str(tasks_file)
    result.update(env or {})
    return result


def _literal(text: str) -> str:
    """Compose interpolates ``$NAME`` from the host's environment: ``$$`` is a literal ``$``."""
    return text.replace("$", "$$")


def override_document(
    workdir: Path, command: Sequence[str], environment: Mapping[str, str]
) -> dict[str, object]:
    """The compose override (JSON is YAML) that turns the ``daemon`` service into this test's
    daemon: its command, its environment, and the work directory at the same path. Every ``$``
    is kept literal: a job's ``"$1"`` is the job's, not something compose fills in."""
    service: dict[str, object] = {
        "environment": {name: _literal(value) for name, value in environment.items()},
        "volumes": [{"type": "bind", "source": str(workdir), "target": str(workdir)}],
    }
    if command:
        service["command"] = ["--", *(_literal(word) for word in command)]
    return {"services": {DAEMON_SERVICE: service}}


def _run(argv: Sequence[str], timeout_s: float = 120.0) -> str:
    result = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")
    return result.stdout


class ComposeDaemon:
    """One ``runbroker run`` as PID 1 of its own container, in its own compose project."""

    def __init__(
        self, workdir: Path, command: Sequence[str] = (), **options: Unpack[StartOptions]
    ) -> None:
        self.workdir = workdir
        self.socket = workdir / "rb.sock"
        tasks_file = None
        if (tasks_toml := options.get("tasks_toml")) is not None:
            tasks_file = workdir / "tasks.toml"
            tasks_file.write_text(tasks_toml)
        os.chown(workdir, DAEMON_UID, DAEMON_UID)
        override = workdir / "compose.override.json"
        environment = daemon_environment(workdir, options.get("env"), tasks_file)
        document = override_document(workdir, command, environment)
        override.write_text(json.dumps(document, indent=2))
        self.compose = ComposeCLI(
            f"rbtest-{uuid.uuid4().hex[:12]}", (*compose_files(), override), (COMPOSE_PROFILE,)
        )
        _run(self.compose.up_argv(DAEMON_SERVICE), timeout_s=600.0)
        self.container = _run(self.compose.container_id_argv(DAEMON_SERVICE)).strip()
        inspect = ["docker", "inspect", "--format", "{{.State.Pid}}", self.container]
        self.pid = int(_run(inspect).strip())
        # `docker logs --follow` keeps the container's two streams apart and ends when the
        # container stops.
        self._logs = subprocess.Popen(
            ["docker", "logs", "--follow", self.container],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._errors: list[bytes] = []
        self.log, self._reader = follow_log(self._logs.stdout)
        self._error_reader = threading.Thread(target=self._read_errors, daemon=True)
        self._error_reader.start()
        if options.get("wait_ready", True):
            self.log.wait_for("broker.ready")

    def exec_argv(self, *args: str, as_user: str | None = None) -> list[str]:
        return self.compose.exec_argv(DAEMON_SERVICE, *args, as_user=as_user)

    def client_env(self) -> dict[str, str] | None:
        """The clients' environment: this process's own (the engine's CLI needs nothing else)."""
        return None

    def exec(
        self, *args: str, as_user: str | None = None, timeout_s: float = WAIT_S
    ) -> subprocess.CompletedProcess[str]:
        return run_client(self.exec_argv(*args, as_user=as_user), self.client_env(), timeout_s)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return open_client(self.exec_argv(*args), self.client_env())

    def zombies(self) -> list[str]:
        """Zombie processes inside the container's PID namespace."""
        return zombies_in_pid_namespace_of(self.pid)

    def signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        _run(["docker", "kill", "--signal", name, self.container])

    def wait(self, timeout_s: float = WAIT_S) -> int:
        code = int(_run(["docker", "wait", self.container], timeout_s=timeout_s).strip())
        self._reader.join(timeout=timeout_s)
        self._error_reader.join(timeout=timeout_s)
        return code

    def _read_errors(self) -> None:
        assert self._logs.stderr is not None
        for chunk in self._logs.stderr:
            self._errors.append(chunk)

    def stderr(self) -> str:
        """What the daemon wrote on stderr (complete once it has exited: see ``wait``)."""
        return b"".join(self._errors).decode("utf-8", "replace")

    def stop(self) -> None:
        subprocess.run(self.compose.down_argv(), capture_output=True, timeout=120, check=False)
        if self._logs.poll() is None:
            self._logs.kill()
        self._logs.wait(timeout=WAIT_S)
        close_pipes(self._logs)


class ComposeBackend:
    name = "compose"

    def __init__(self, project: str | None = None) -> None:
        # The stack started by `docker compose up` (default project name: runbroker).
        self.stack = ComposeCLI(project or "runbroker", compose_files())

    def start(
        self, workdir: Path, command: Sequence[str] = (), **options: Unpack[StartOptions]
    ) -> DaemonHandle:
        return ComposeDaemon(workdir, command, **options)

    def broker_argv(self, *args: str, as_user: str | None = None) -> list[str]:
        """``docker compose exec -T broker runbroker ARGS``: the running stack's broker."""
        return self.stack.exec_argv(BROKER_SERVICE, *args, as_user=as_user)


BACKENDS: dict[str, type[LocalBackend] | type[ComposeBackend]] = {
    "local": LocalBackend,
    "compose": ComposeBackend,
}


def get_backend(environ: Mapping[str, str] | None = None) -> Backend:
    """The backend named by ``RUNBROKER_TEST_BACKEND`` (default ``local``); an unknown name
    is an error naming the known ones, never a silent fallback."""
    env = os.environ if environ is None else environ
    name = env.get(BACKEND_ENV, "") or "local"
    try:
        factory = BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise ValueError(f"{BACKEND_ENV}={name!r} is not a backend (known: {known})") from None
    return factory()
