"""A stand-in ``docker`` for exercising the compose test backend where no engine exists.

It implements only the command lines ``tests/support/backends.py`` runs, with the semantics
the Docker CLI documents for them, on top of what the local backend uses: the service's config
comes from the real compose binary (``config --format json``), the "container" is ``runbroker
run`` as PID 1 of a new PID namespace running as the image's uid, ``exec`` is nsenter. State lives
in ``$FAKE_DOCKER_STATE/<project>``. It proves the backend's plumbing (its files, its parsing of
the CLI's answers, its log and exit handling), not Docker's behaviour.

    docker compose [--project-name P] [--file F]... [--profile X]... up|ps|exec|down ...
    docker inspect --format {{.State.Pid}} ID | docker logs --follow ID | docker kill --signal S ID
    docker wait ID
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

# A program of its own (the test's ``docker`` shim runs it), sharing the tiers' bounded poll.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.eventually import eventually
from tests.support.harness import forked_by_unshare

STATE = Path(os.environ["FAKE_DOCKER_STATE"])
COMPOSE = os.environ["FAKE_DOCKER_COMPOSE_BINARY"]
RUNBROKER = os.environ["FAKE_DOCKER_RUNBROKER"]
UID = "10001"
START_S = 20.0
"""How long a container may take to start, or to end once killed."""
LIFETIME_S = 600.0
"""Longer than any test's container lives (pytest's timeout is 120 s): a ``logs --follow`` or
``wait`` that a killed test left behind ends by itself."""


def _fail(message: str) -> None:
    print(f"fake docker: {message}", file=sys.stderr)
    sys.exit(1)


def _unshare_pid(box: Path) -> int:
    return int((box / "unshare.pid").read_text())


def _exited(box: Path) -> bool:
    return (box / "exit").exists()


def _init_pid(box: Path) -> int:
    """The container's PID 1; -1 once its unshare is gone."""
    return forked_by_unshare(_unshare_pid(box), timeout_s=START_S)


def _service(box: Path) -> dict[str, Any]:
    service: dict[str, Any] = json.loads((box / "service.json").read_text())
    return service


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = {k: str(v).replace("$$", "$") for k, v in (service.get("environment") or {}).items()}
    env["PATH"] = os.environ["PATH"]
    return env


def compose(args: list[str]) -> None:
    project, files, profiles = "", [], []
    while args[0].startswith("-"):
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--project-name":
            project = value
        elif flag == "--file":
            files.append(value)
        elif flag == "--profile":
            profiles.append(value)
    box = STATE / project
    command, rest = args[0], args[1:]
    if command == "up":
        name = rest[-1]
        argv = [COMPOSE, "--project-name", project]
        for path in files:
            argv += ["--file", path]
        for profile in profiles:
            argv += ["--profile", profile]
        resolved = subprocess.run([*argv, "config", "--format", "json"], capture_output=True)
        if resolved.returncode != 0:
            _fail(resolved.stderr.decode())
        service = json.loads(resolved.stdout)["services"][name]
        box.mkdir(parents=True)
        (box / "service.json").write_text(json.dumps(service))
        words = [w.replace("$$", "$") for w in service.get("command") or []]
        run = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
        run += ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
        run += [RUNBROKER, "run", *words]
        supervisor = (
            "import subprocess, sys, pathlib\n"
            "box = pathlib.Path(sys.argv[1])\n"
            "out = open(box / 'out', 'wb'); err = open(box / 'err', 'wb')\n"
            "p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=err, stdin=subprocess.DEVNULL)\n"
            "(box / 'unshare.pid').write_text(str(p.pid))\n"
            "code = p.wait()\n"
            "(box / 'exit.tmp').write_text(str(code if code >= 0 else 128 - code))\n"
            "(box / 'exit.tmp').rename(box / 'exit')\n"
        )
        subprocess.Popen(
            [sys.executable, "-c", supervisor, str(box), *run],
            env=_env(service),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        eventually(
            (box / "unshare.pid").exists, "the container to start", timeout_s=START_S, every_s=0.005
        )
    elif command == "ps":
        print(project)
    elif command == "exec":
        user = None
        while rest[0].startswith("-"):
            if rest[0] == "--user":
                user, rest = rest[1], rest[2:]
            else:
                rest = rest[1:]
        words = rest[1:]
        argv = ["nsenter", "-t", str(_init_pid(box)), "-p", "-m", "--"]
        uid = user or UID
        group = "nogroup" if user == "nobody" else uid
        argv += ["setpriv", f"--reuid={uid}", f"--regid={group}", "--clear-groups"]
        if words[0] == "runbroker":
            words = [RUNBROKER, *words[1:]]
        os.execvpe(argv[0], [*argv, *words], _env(_service(box)))  # noqa: S606
    elif command == "down":
        if box.exists() and not (box / "exit").exists():
            # The init itself: setpriv's change of uid cleared the parent-death signal that
            # `unshare --kill-child` set, so killing unshare alone would leave it running.
            init = _init_pid(box)
            if init > 0:
                os.kill(init, signal.SIGKILL)
            os.kill(_unshare_pid(box), signal.SIGKILL)
            eventually(
                lambda: _exited(box),
                "the killed container to exit",
                timeout_s=START_S,
                every_s=0.01,
            )
        shutil.rmtree(box, ignore_errors=True)
    else:
        _fail(f"compose {command} is not faked")


def _follow(box: Path) -> None:
    """Copy the container's stdout and stderr until it has exited and both are drained."""
    with (box / "out").open("rb") as out, (box / "err").open("rb") as err:
        _copy_until_exit(box, [(out, sys.stdout.buffer), (err, sys.stderr.buffer)])


def _copy_until_exit(box: Path, sources: list[tuple[BinaryIO, BinaryIO]]) -> None:
    def drained_after_exit() -> bool:
        finished = _exited(box)
        moved = False
        for source, sink in sources:
            chunk = source.read()
            if chunk:
                sink.write(chunk)
                sink.flush()
                moved = True
        return finished and not moved

    eventually(drained_after_exit, "the container to exit", timeout_s=LIFETIME_S, every_s=0.01)


def main() -> None:
    args = sys.argv[1:]
    if args[0] == "compose":
        compose(args[1:])
        return
    box = STATE / args[-1]
    if args[0] == "inspect":
        print(_init_pid(box))
    elif args[0] == "logs":
        _follow(box)
    elif args[0] == "kill":
        init = _init_pid(box)
        if init <= 0:  # gone: kill(-1) would signal every process of the machine
            _fail(f"container {args[-1]} is not running")
        os.kill(init, signal.Signals[args[2]])
    elif args[0] == "wait":
        eventually(
            lambda: _exited(box), "the container to exit", timeout_s=LIFETIME_S, every_s=0.01
        )
        print((box / "exit").read_text())
    else:
        _fail(f"{args[0]} is not faked")


if __name__ == "__main__":
    main()
