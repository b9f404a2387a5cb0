"""Broker benchmarks: cold trigger start-up, socket round trips, daemon memory.

Run it from a regular install, as a container has: ``python3 -m venv /tmp/rb && /tmp/rb/bin/pip
install . && /tmp/rb/bin/python bench/bench_broker.py``. (An editable install adds a path finder
to every interpreter start, ``python -c pass`` included, which hides the client's own cost.)
Figures are printed; ratios are measured within the same run because the machine is shared and
noisy.

1. ``runbroker trigger noop`` as a cold process, alternated with ``python -c pass``: median ratio
   (goal <= 2.0).
2. Round trips per second with 64 concurrent socket clients on a no-op task, p50/p99 latency.
3. The daemon's idle RSS (goal <= 40 MiB) and its RSS after 10,000 runs (goal: growth <= 2 MiB).
4. The start cost of a command job (``true``) against the daemon's size: a lean daemon and one
   whose handler module holds 1 GiB of touched heap, sequential round trips alternated between
   them, p50 of each and the ratio (goal <= 1.15: a start must not grow with the daemon).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNBROKER = str(Path(sys.executable).with_name("runbroker"))
TASKS = (
    '[tasks.noop]\nhandler = "daemon.core.builtin_tasks:noop"\n[tasks.true]\ncommand = ["true"]\n'
)
# A handler module that holds 1 GiB of touched heap from the daemon's start.
BALLAST_MODULE = 'BALLAST = b"\\x01" * (1 << 30)\n\n\nasync def noop(run):\n    return None\n'
BALLAST_TASKS = TASKS + '[tasks.ballast]\nhandler = "rb_ballast:noop"\n'


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def start_daemon(workdir: Path, tasks: str = TASKS) -> tuple[subprocess.Popen[bytes], Path]:
    socket_path = workdir / "rb.sock"
    (workdir / "tasks.toml").write_text(tasks)
    (workdir / "rb_ballast.py").write_text(BALLAST_MODULE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNBROKER_")}
    env.update(
        PYTHONPATH=str(workdir),
        RUNBROKER_SOCKET=str(socket_path),
        RUNBROKER_TASKS_FILE=str(workdir / "tasks.toml"),
        RUNBROKER_QUEUE_CAPACITY="256",
        RUNBROKER_LOG_LEVEL="warning",
        RUNBROKER_LOG_FORMAT="json",
    )
    proc = subprocess.Popen([RUNBROKER, "run"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not socket_path.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("daemon did not start")
        time.sleep(0.01)
    return proc, socket_path


def cold_start(socket_path: Path, rounds: int) -> None:
    env = dict(os.environ, RUNBROKER_SOCKET=str(socket_path))
    trigger_ms: list[float] = []
    python_ms: list[float] = []
    ratios: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run([RUNBROKER, "trigger", "noop"], env=env, check=True, capture_output=True)
        t1 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        t2 = time.perf_counter()
        trigger_ms.append((t1 - t0) * 1000)
        python_ms.append((t2 - t1) * 1000)
        ratios.append((t1 - t0) / (t2 - t1))
    print(
        f"cold trigger: median {statistics.median(trigger_ms):.1f} ms, "
        f"python -c pass: median {statistics.median(python_ms):.1f} ms, "
        f"median ratio {statistics.median(ratios):.2f} (goal <= 2.0), rounds {rounds}"
    )


async def _round_trip(socket_path: Path, task: str = "noop") -> float:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    writer.write(b'{"task":"%s"}\n' % task.encode())
    await writer.drain()
    done = None
    while line := await reader.readline():
        event = json.loads(line)
        if event["event"] == "done":
            done = event
    writer.close()
    await writer.wait_closed()
    if done is None or not done["ok"]:
        raise RuntimeError(f"run failed: {done}")
    return time.perf_counter() - t0


async def concurrent(socket_path: Path, clients: int, total: int) -> None:
    latencies: list[float] = []
    remaining = total

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            latencies.append(await _round_trip(socket_path))

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(clients):
            group.create_task(client())
    elapsed = time.perf_counter() - t0
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    print(
        f"{clients} concurrent clients: {len(latencies)} round trips in {elapsed:.2f} s = "
        f"{len(latencies) / elapsed:.0f}/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )


async def start_cost_by_size(lean: Path, heavy: Path, rounds: int) -> None:
    lean_ms: list[float] = []
    heavy_ms: list[float] = []
    for _ in range(rounds):
        lean_ms.append(await _round_trip(lean, "true") * 1000)
        heavy_ms.append(await _round_trip(heavy, "true") * 1000)
    lean_p50, heavy_p50 = statistics.median(lean_ms), statistics.median(heavy_ms)
    print(
        f"a `true` job, sequential, {rounds} alternated rounds: lean daemon p50 {lean_p50:.2f} ms, "
        f"daemon holding 1 GiB p50 {heavy_p50:.2f} ms, ratio {heavy_p50 / lean_p50:.2f} "
        "(goal <= 1.15)"
    )


def size_case(rounds: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="rbl-", dir="/tmp") as lean_dir,
        tempfile.TemporaryDirectory(prefix="rbh-", dir="/tmp") as heavy_dir,
    ):
        lean, lean_socket = start_daemon(Path(lean_dir))
        heavy, heavy_socket = start_daemon(Path(heavy_dir), BALLAST_TASKS)
        try:
            print(
                f"RSS: lean daemon {rss_kib(lean.pid) / 1024:.0f} MiB, "
                f"the other {rss_kib(heavy.pid) / 1024:.0f} MiB"
            )
            asyncio.run(start_cost_by_size(lean_socket, heavy_socket, rounds))
        finally:
            for proc in (lean, heavy):
                proc.terminate()
                proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--size-rounds", type=int, default=300)
    args = parser.parse_args()
    size_case(args.size_rounds)
    with tempfile.TemporaryDirectory(prefix="rbb-", dir="/tmp") as tmp:
        proc, socket_path = start_daemon(Path(tmp))
        try:
            subprocess.run(
                [RUNBROKER, "trigger", "noop"],
                env=dict(os.environ, RUNBROKER_SOCKET=str(socket_path)),
                check=True,
                capture_output=True,
            )
            idle_kib = rss_kib(proc.pid)
            print(f"idle RSS after one run: {idle_kib / 1024:.1f} MiB (goal <= 40 MiB)")
            cold_start(socket_path, args.rounds)
            warm_kib = rss_kib(proc.pid)
            asyncio.run(concurrent(socket_path, 64, args.runs))
            after_kib = rss_kib(proc.pid)
            print(
                f"RSS before {args.runs} runs: {warm_kib / 1024:.1f} MiB, after: "
                f"{after_kib / 1024:.1f} MiB, growth {(after_kib - warm_kib) / 1024:.2f} MiB "
                "(goal <= 2 MiB)"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
