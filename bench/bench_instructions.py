"""Instructions the daemon spends on one run (callgrind), a hot-path figure that load does not move.

    python bench/bench_instructions.py [--runs 200,1000]
    python bench/bench_instructions.py --runbroker before=OLD_VENV/bin/runbroker \\
        --runbroker after=NEW_VENV/bin/runbroker

On a shared machine ``side-by-side``'s rates swing more from one round to the next than most
changes to the hot path move them. Instructions counted by valgrind's callgrind do not: the same
binary and inputs give the same count whatever else runs. Each build's daemon is started under
callgrind twice, served the two numbers of runs of ``--runs`` one after the other
by a plain client, then stopped; the difference of the two totals over the difference of the
runs is what one run costs, start-up and shutdown cancelling out. The run is the shipped no-op
handler (``daemon.core.builtin_tasks:noop``), as ``side-by-side``'s no-op. A command's run
cannot be counted this way: valgrind 3.19 does not implement ``pidfd_open``, with which the
daemon waits for its children. Without ``--runbroker``, the ``runbroker`` on PATH. Needs
valgrind.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_lean import builds_given
from bench_lean_parts import Build, daemon_env

TASKS = '[tasks.default]\nhandler = "daemon.core.builtin_tasks:noop"\n'
REQUEST = b"{}\n"  # the default task, as ``runbroker trigger`` asks for it
START_TIMEOUT_S = 300.0  # an interpreter's start under callgrind is some 50 times slower
TOTAL = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def one_run(socket_path: Path) -> None:
    """Trigger the default task once and read its answer to the end; fail unless it succeeded."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path))
        sock.sendall(REQUEST)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    last = answer.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if b'"done"' not in last or b'"ok":true' not in last:
        raise RuntimeError(f"a run did not succeed: {answer[-300:]!r}")


def wait_listening(proc: subprocess.Popen[bytes], socket_path: Path) -> None:
    """Until the socket takes a run, without a connection the daemon would serve meanwhile: a
    refused connect never reaches its accept, so the count does not depend on how long it took."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args!r} did not start")
        try:
            one_run(socket_path)  # the first run: counted in both totals alike
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.05)  # not bound yet, or bound and not listening yet
        else:
            return


def instructions(build: Build, runs: int, workdir: Path) -> int:
    """The daemon's instructions for start-up, ``runs`` runs (and the first) and a stop."""
    socket_path = workdir / "noop.sock"
    out = workdir / f"callgrind.{runs}"
    env = daemon_env(
        socket_path,
        RUNBROKER_TASKS_FILE=str(workdir / "tasks.toml"),
        RUNBROKER_LOG_LEVEL="warning",
        PYTHONHASHSEED="0",  # the same dict layouts in every run
    )
    argv = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        str(build.python),
        str(build.runbroker),
        "run",
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, socket_path)
        for _ in range(runs):
            one_run(socket_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=START_TIMEOUT_S)
    found = TOTAL.search(out.read_bytes())
    if found is None:
        raise RuntimeError(f"{out}: no total in callgrind's output")
    return int(found.group(1))


def per_run(build: Build, low: int, high: int) -> float:
    with tempfile.TemporaryDirectory(prefix="rb-instr-") as tmp:
        workdir = Path(tmp)
        (workdir / "tasks.toml").write_text(TASKS)
        few = instructions(build, low, workdir)
        many = instructions(build, high, workdir)
    return (many - few) / (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="200,1000", help="the two numbers of runs (LOW,HIGH)")
    parser.add_argument("--runbroker", action="append", default=[], metavar="LABEL=PATH")
    args = parser.parse_args()
    low, high = (int(n) for n in args.runs.split(","))
    if not 0 < low < high:
        parser.error("--runs: two numbers, the first smaller")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian's package valgrind)")
    builds = builds_given(args.runbroker)
    costs: dict[str, float] = {}
    for build in builds:
        costs[build.label] = per_run(build, low, high)
        print(f"{build.label}: {costs[build.label]:,.0f} instructions a no-op run", flush=True)
    first = builds[0].label
    for label, cost in costs.items():
        if label != first:
            print(f"{label}/{first}: {cost / costs[first]:.3f}")


if __name__ == "__main__":
    main()
