"""Notifications never slow the runs: side-by-side ratios against a daemon without them.

Three daemons run the same tasks: one without notifications, one whose every success goes to
a webhook that is down (connection refused: 3 attempts, backoff 1 s), one whose webhook never
answers (a listening socket that is never read: each attempt waits its 5 s timeout). Figures:

1. sequential round trips of a no-op handler and of a ``true`` command, alternated between the
   three: p50 of each, and each notified daemon's ratio to the plain one (goal <= 1.15);
2. the rate of 32 concurrent clients (goal: ratio >= 0.85), and each daemon's RSS after them
   (the notifications' queue is bounded: no growth with the runs).

Run it as ``bench/bench_broker.py`` says (a regular install): ``python bench/bench_notify.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_broker import TASKS, _round_trip, rss_kib, start_daemon


def notified(url: str) -> str:
    return TASKS + (
        f'[notify.webhook]\nurl = "{url}"\non = ["success", "failure"]\n'
        'timeout = "5s"\nattempts = 3\nbackoff = "1s"\n'
    )


async def alternated(sockets: dict[str, Path], task: str, rounds: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in sockets}
    for _ in range(rounds):
        for name, path in sockets.items():
            times[name].append(await _round_trip(path, task) * 1000)
    p50 = {name: statistics.median(found) for name, found in times.items()}
    words = ", ".join(
        f"{name} p50 {p50[name]:.2f} ms (ratio {p50[name] / p50['plain']:.2f})" for name in p50
    )
    print(f"{task}, {rounds} alternated sequential rounds: {words} (goal <= 1.15)")


async def rate(path: Path, clients: int, total: int) -> float:
    remaining = total

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await _round_trip(path)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(clients):
            group.create_task(client())
    return total / (time.perf_counter() - started)


def measure(
    daemons: dict[str, tuple[subprocess.Popen[bytes], Path]], rounds: int, runs: int
) -> None:
    sockets = {name: path for name, (_proc, path) in daemons.items()}
    asyncio.run(alternated(sockets, "noop", rounds))
    asyncio.run(alternated(sockets, "true", rounds))
    rates = {name: asyncio.run(rate(path, 32, runs)) for name, path in sockets.items()}
    words = ", ".join(
        f"{name} {rates[name]:.0f}/s (ratio {rates[name] / rates['plain']:.2f})" for name in rates
    )
    print(f"32 concurrent clients, {runs} runs each daemon: {words} (goal >= 0.85)")
    sizes = {name: rss_kib(proc.pid) / 1024 for name, (proc, _path) in daemons.items()}
    print("RSS after the runs: " + ", ".join(f"{n} {mib:.0f} MiB" for n, mib in sizes.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3000)
    args = parser.parse_args()
    with socket.socket() as refused, socket.socket() as silent:
        refused.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        silent.bind(("127.0.0.1", 0))
        silent.listen(4096)  # listening, never read: requests are never answered
        urls = {
            "down": f"http://127.0.0.1:{refused.getsockname()[1]}/hook",
            "silent": f"http://127.0.0.1:{silent.getsockname()[1]}/hook",
        }
        with tempfile.TemporaryDirectory(prefix="rbn-", dir="/tmp") as top:
            for name in ("plain", *urls):
                Path(top, name).mkdir()
            daemons = {"plain": start_daemon(Path(top, "plain"), TASKS)}
            for name, url in urls.items():
                daemons[name] = start_daemon(Path(top, name), notified(url))
            try:
                measure(daemons, args.rounds, args.runs)
            finally:
                for proc, _path in daemons.values():
                    proc.terminate()
                    proc.wait(timeout=30)


if __name__ == "__main__":
    main()
