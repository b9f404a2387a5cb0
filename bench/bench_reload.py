"""Reload benchmark: does the daemon keep answering while a tasks file at the size cap loads?

The file is the largest a tasks file may be (1 MiB): about 17,800 cron tasks, one a line of
distinct minute fields. For each daemon given (``--runbroker LABEL=PATH``, alternated round by
round in the same run, as the machine is shared and noisy):

1. reload: a daemon started on a one-task file is asked ``{"op": "reload"}`` of the large one
   while a prober sends ``health`` one after another; printed: how long the reload took, how
   many ``health`` answers came meanwhile and their latency (p50, p99, max; goal max <= 100 ms);
2. dry run: ``{"op": "reload", "dry_run": true}`` of the large file, its time and the same
   ``health`` figures;
3. start: from the daemon's start on the large file to its first ``health`` answer.

``python bench/bench_reload.py --runbroker before=/tmp/old/bin/runbroker --runbroker
after=.venv/bin/runbroker``; without ``--runbroker``, the ``runbroker`` beside this Python.
``--metrics``: with ``RUNBROKER_METRICS_ADDR`` set (each new task's series are made too).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SMALL = '[tasks.one]\ncommand = "true"\nschedule = "cron 0 * * * *"\n'
LIMIT_BYTES = 1 << 20


def large_tasks() -> str:
    """As many cron tasks as fit in the size cap."""
    lines: list[str] = []
    size = 0
    number = 0
    while True:
        entry = f'[tasks.t{number:05d}]\ncommand="true"\nschedule="cron {number % 60} * * * *"\n'
        if size + len(entry) > LIMIT_BYTES:
            return "".join(lines)
        lines.append(entry)
        size += len(entry)
        number += 1


def ask(path: Path, request: dict[str, object], timeout_s: float = 120.0) -> dict[str, object]:
    """One control request over the socket and its answer line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    answer: dict[str, object] = json.loads(data)
    return answer


class Prober:
    """``health`` one after another in a thread of its own, each round trip's time kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.latencies_ms: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            ask(self.path, {"op": "health"})
            self.latencies_ms.append((time.perf_counter() - started) * 1000)

    def __enter__(self) -> Prober:
        self.thread.start()
        while not self.latencies_ms:  # probing before the request is sent
            time.sleep(0.001)
        self.latencies_ms.clear()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join()


METRICS: dict[str, str] = {}  # RUNBROKER_METRICS_ADDR, with --metrics


def start(runbroker: str, workdir: Path, tasks: Path) -> tuple[subprocess.Popen[bytes], Path]:
    sock = workdir / "rb.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNBROKER_")}
    env.update(
        RUNBROKER_SOCKET=str(sock),
        RUNBROKER_TASKS_FILE=str(tasks),
        RUNBROKER_INTERVAL="off",
        RUNBROKER_LOG_LEVEL="warning",
        RUNBROKER_LOG_FORMAT="json",
        **METRICS,
    )
    proc = subprocess.Popen([runbroker, "run"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{runbroker} did not start")
        try:
            if ask(sock, {"op": "health"}, timeout_s=60).get("ok"):
                return proc, sock
        except OSError:
            time.sleep(0.01)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(60)


def figures(latencies_ms: list[float]) -> str:
    if not latencies_ms:
        return "health: no answer during it"
    ordered = sorted(latencies_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"health: {len(ordered)} answers, p50 {statistics.median(ordered):.1f} ms, "
        f"p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms"
    )


def one_round(label: str, runbroker: str, large: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="rb-bench-reload-") as tmp:
        workdir = Path(tmp)
        # The tasks file behind a directory symlink the watch does not see, so that only the
        # requests reload it.
        (workdir / "small").mkdir()
        (workdir / "large").mkdir()
        (workdir / "small" / "tasks.toml").write_text(SMALL)
        (workdir / "large" / "tasks.toml").write_text(large)
        (workdir / "current").symlink_to("small")
        proc, sock = start(runbroker, workdir, workdir / "current" / "tasks.toml")
        try:
            (workdir / "next").symlink_to("large")
            os.replace(workdir / "next", workdir / "current")
            with Prober(sock) as dry_probe:
                started = time.perf_counter()
                dry = ask(sock, {"op": "reload", "dry_run": True})
                dry_s = time.perf_counter() - started
            assert dry.get("ok"), dry.get("reason")
            with Prober(sock) as reload_probe:
                started = time.perf_counter()
                done = ask(sock, {"op": "reload"})
                reload_s = time.perf_counter() - started
            assert done.get("ok"), done.get("reason")
        finally:
            stop(proc)
        started = time.perf_counter()
        proc, sock = start(runbroker, workdir, workdir / "large" / "tasks.toml")
        start_s = time.perf_counter() - started
        stop(proc)
    print(
        f"  {label}: reload {reload_s:.2f} s, {figures(reload_probe.latencies_ms)}\n"
        f"  {label}: dry run {dry_s:.2f} s, {figures(dry_probe.latencies_ms)}\n"
        f"  {label}: start {start_s:.2f} s"
    )
    return {
        "reload_s": reload_s,
        "reload_health_max_ms": max(reload_probe.latencies_ms, default=reload_s * 1000),
        "dry_s": dry_s,
        "dry_health_max_ms": max(dry_probe.latencies_ms, default=dry_s * 1000),
        "start_s": start_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runbroker", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--metrics", action="store_true", help="RUNBROKER_METRICS_ADDR set")
    args = parser.parse_args()
    if args.metrics:
        METRICS["RUNBROKER_METRICS_ADDR"] = "127.0.0.1:0"
    daemons = [tuple(item.split("=", 1)) for item in args.runbroker] or [
        ("this", str(Path(sys.executable).with_name("runbroker")))
    ]
    large = large_tasks()
    tasks = large.count("[tasks.")
    print(f"tasks file: {len(large.encode())} bytes, {tasks} cron tasks")
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in daemons}
    for number in range(1, args.rounds + 1):
        print(f"round {number}")
        for label, runbroker in daemons:
            results[label].append(one_round(label, runbroker, large))
    print("medians over the rounds:")
    for label, rounds in results.items():
        medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        print(
            f"  {label}: reload {medians['reload_s']:.2f} s (health max "
            f"{medians['reload_health_max_ms']:.0f} ms), dry run {medians['dry_s']:.2f} s "
            f"(health max {medians['dry_health_max_ms']:.0f} ms), start {medians['start_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
