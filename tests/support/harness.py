"""Runs the real ``runbroker`` as a container would, and talks to it as ``docker exec`` would.

Backend ``local`` (the default, ``RUNBROKER_TEST_BACKEND=local``): the daemon is PID 1 of a new
PID namespace (``unshare --pid --fork --kill-child --mount-proc``) and clients enter that
namespace with ``nsenter``. The daemon's JSON log lines are collected so a test can wait for an
event instead of sleeping.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypedDict, Unpack

from tests.support.eventually import eventually

RUNBROKER = str(Path(sys.executable).with_name("runbroker"))
WAIT_S = 20.0
# A handler module whose handler ignores cancellation: the daemon must still end within its
# shutdown budget.
STUBBORN_HANDLER = """
import asyncio


async def stubborn(run):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # ignores cancellation
"""


def processes_in_pid_namespace_of(pid: int) -> Iterator[Path]:
    """/proc/N of every process in the PID namespace of ``pid`` (seen from this host)."""
    try:
        target = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") == target:
                yield entry
        except OSError:
            continue  # gone meanwhile


def host_pid_of(namespace_pid: int, ns_pid: int) -> int:
    """The pid this host sees for the process ``ns_pid`` of the PID namespace of the process
    ``namespace_pid`` (this host's pid of it)."""
    for entry in processes_in_pid_namespace_of(namespace_pid):
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == ns_pid:
                return int(entry.name)
    raise AssertionError(f"no process {ns_pid} in the namespace of {namespace_pid}")


def zombies_in_pid_namespace_of(pid: int) -> list[str]:
    """/proc/PID/stat of every zombie in the PID namespace of ``pid`` (seen from this host)."""
    found = []
    for entry in processes_in_pid_namespace_of(pid):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] == "Z":
            found.append(stat)
    return found


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(item) for item in text)
    return found


def forked_by_unshare(
    unshare_pid: int, exited: Callable[[], bool] = lambda: False, timeout_s: float = WAIT_S
) -> int:
    """The process ``unshare --fork`` started (PID 1 of the new namespace), once it has forked:
    the kernel gives no event for that. -1 when unshare is gone without one (``exited()`` says
    so, or its /proc entry has gone)."""

    def child_or_gone() -> int | None:
        if exited():
            return -1
        try:
            children = children_of(unshare_pid)
        except OSError:
            return -1
        return children[0] if children else None

    found = eventually(
        child_or_gone,
        "unshare to fork PID 1",
        until=lambda pid: pid is not None,
        timeout_s=timeout_s,
        every_s=0.005,
    )
    assert found is not None
    return found


@dataclass
class LogTail:
    """The daemon's stdout, parsed as JSON lines, with a condition to wait on."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    closed: bool = False

    def feed(self, stream: Any) -> None:
        for raw in stream:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.raw.append(text)
                try:
                    obj = json.loads(text)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    self.lines.append(obj)
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(
        self,
        event: str,
        predicate: Callable[[dict[str, Any]], bool] = lambda _line: True,
        timeout_s: float = WAIT_S,
        count: int = 1,
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        found: list[dict[str, Any]] = []
        seen = 0  # lines already looked at: each wake-up looks only at the new ones
        with self.cond:
            while True:
                lines = self.lines
                found.extend(
                    line
                    for line in itertools.islice(lines, seen, None)
                    if line.get("event") == event and predicate(line)
                )
                seen = len(lines)
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    raise AssertionError(
                        f"no {count} x {event!r} in the daemon's log; last lines:\n"
                        + "\n".join(self.raw[-30:])
                    )
                self.cond.wait(remaining)

    def events(self, event: str) -> list[dict[str, Any]]:
        with self.cond:
            return [line for line in self.lines if line.get("event") == event]


class StartOptions(TypedDict, total=False):
    """What a test may ask of the daemon it starts, beside its work directory and command, on
    either backend: ``env`` added to the daemon's environment, ``tasks_toml`` written to its
    tasks file, and whether to wait for ``broker.ready`` (default: yes)."""

    env: Mapping[str, str] | None
    tasks_toml: str | None
    wait_ready: bool


def follow_log(stdout: IO[bytes] | None) -> tuple[LogTail, threading.Thread]:
    """A daemon's stdout read into a ``LogTail`` from now on, by a thread of its own."""
    log = LogTail()
    reader = threading.Thread(target=log.feed, args=(stdout,), daemon=True)
    reader.start()
    return log, reader


def run_client(
    argv: list[str], env: dict[str, str] | None, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """A client run to its end (``env``: None for this process's own), as either backend runs
    one."""
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def open_client(argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[str]:
    """A client left running, its output piped to the test."""
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def close_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Closes what is left of a process's output pipes, once their readers have ended."""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


class Daemon:
    """One ``runbroker run`` as PID 1 of its own PID namespace."""

    def __init__(
        self,
        workdir: Path,
        command: Sequence[str] = (),
        *,
        init: Sequence[str] = (),
        **options: Unpack[StartOptions],
    ) -> None:
        """``init``: a command that becomes PID 1 of the namespace instead of the daemon and
        starts it as its child (``docker run --init``); ``pid`` is then that PID 1's."""
        self.workdir = workdir
        self.socket = workdir / "rb.sock"
        self.env = {
            key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")
        }
        self.env.update(
            {
                "RUNBROKER_SOCKET": str(self.socket),
                "RUNBROKER_LOG_FORMAT": "json",
                "RUNBROKER_INTERVAL": "off",
                "RUNBROKER_TASKS_FILE": str(workdir / "tasks.toml"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if (tasks_toml := options.get("tasks_toml")) is not None:
            (workdir / "tasks.toml").write_text(tasks_toml)
        else:
            self.env.pop("RUNBROKER_TASKS_FILE")
        self.env.update(options.get("env") or {})
        argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *init, RUNBROKER]
        argv.append("run")
        if command:
            argv += ["--", *command]
        self.proc = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.log, self._reader = follow_log(self.proc.stdout)
        self.pid = forked_by_unshare(self.proc.pid, lambda: self.proc.poll() is not None)
        if options.get("wait_ready", True):
            self.log.wait_for("broker.ready")

    def client_env(self) -> dict[str, str]:
        return {"RUNBROKER_SOCKET": str(self.socket), "PATH": os.environ.get("PATH", "")}

    def exec_argv(self, *args: str, as_user: str | None = None) -> list[str]:
        """argv of ``runbroker ARGS`` entered into the daemon's namespaces (``docker exec``)."""
        argv = ["nsenter", "-t", str(self.pid), "-p", "-m", "--"]
        if as_user is not None:
            argv += ["setpriv", f"--reuid={as_user}", "--regid=nogroup", "--clear-groups"]
        return [*argv, RUNBROKER, *args]

    def exec(
        self, *args: str, as_user: str | None = None, timeout_s: float = WAIT_S
    ) -> subprocess.CompletedProcess[str]:
        return run_client(self.exec_argv(*args, as_user=as_user), self.client_env(), timeout_s)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return open_client(self.exec_argv(*args), self.client_env())

    def zombies(self) -> list[str]:
        """Zombie processes inside the daemon's PID namespace."""
        return zombies_in_pid_namespace_of(self.pid)

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def wait(self, timeout_s: float = WAIT_S) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=timeout_s)
        return code

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # --kill-child takes the namespace down
            self.proc.wait(timeout=WAIT_S)
        # The log reader ends at the pipe's end of file; closing the pipe under it while it
        # reads raises in its thread.
        self._reader.join(timeout=WAIT_S)
        close_pipes(self.proc)


class Workdir:
    """A short temporary directory (socket paths are limited to about 107 bytes)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
