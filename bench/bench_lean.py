"""Issue 35's table in one command: every figure beside its reference, measured in the same run.

    python bench/bench_lean.py [--rounds 3] [--only memory,side-by-side,drain,start]
    python bench/bench_lean.py --runbroker before=/tmp/old/bin/runbroker \\
        --runbroker after=/tmp/new/bin/runbroker

Without ``--runbroker``, the ``runbroker`` on PATH. With it twice, the builds alternate part by
part within each round (the order flips every round), as ``bench_reload.py`` does. Each figure
is printed per round, then as its median and spread (min-max) per build, with its reference's
and the ratio's (taken within a round). The parts:

- ``memory``: the RSS of every runbroker process (the daemon and its descendants running the
  same interpreter: the watchdog), idle after one triggered run, for the README's demo (a
  command task, default settings) and for ``bench_broker.py``'s handler task at
  ``RUNBROKER_LOG_LEVEL=warning``; the reference is the Go broker's idle RSS
  (``go-trigger-anchor daemon SOCK`` after one trigger).
- ``side-by-side``: ``side-by-side 1`` of the anchor directory per round and build (no-op and
  ``true``, 64 clients and one client's p50), runbroker/Go.
- ``drain``: ``bench_pgrunner.py --reps 1 --parts drain`` run by each build's own interpreter
  (it needs ``.[bench]``, pgqueuer, and PostgreSQL; ``RUNBROKER_BENCH_DSN``), 1 and 3
  replicas, runbroker/pgqueuer.
- ``start``: from spawning ``runbroker run -- true`` to its socket accepting a connection,
  against ``python -c pass`` of the same interpreter (the machine's own start cost), alternated.

The anchor is ``../shared/anchor/`` beside the project (or beside the main checkout of a git
worktree), or ``--anchor DIR``; when it is missing the script says so and exits 1. A regular
install (``pip install .``, not editable) measures what users get.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import bench_broker

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
PARTS = ("memory", "side-by-side", "drain", "start")
SETTLE_S = 1.0  # after the one run, before the RSS is read: the run's leftovers are gone
STARTS_PER_ROUND = 5
DEMO_COMMAND = ["sh", "-c", 'echo "hello from run $RUNBROKER_RUN_ID"']


@dataclass(frozen=True)
class Figure:
    """One row of the table: what is measured, against what, and the issue's goal."""

    title: str
    unit: str
    reference: str
    goal: str


FIGURES = {
    "rss_demo": Figure(
        "RSS, all runbroker processes, idle after one run, README demo", "MiB", "Go idle", "<= 40"
    ),
    "rss_handler": Figure(
        "RSS, all runbroker processes, handler task, LOG_LEVEL=warning", "MiB", "Go idle", "<= 35"
    ),
    "noop_c64": Figure("no-op, 64 clients", "/s", "Go", ">= 0.6x"),
    "noop_seq": Figure("no-op, one client, p50", "us", "Go", "<= 1.2x"),
    "true_c64": Figure("`true`, 64 clients", "/s", "Go", ">= 1.0x"),
    "true_seq": Figure("`true`, one client, p50", "us", "Go", "<= 1.1x"),
    "drain_1": Figure("database drain, 1 replica", "jobs/s", "pgqueuer", ">= 2.0x"),
    "drain_3": Figure("database drain, 3 replicas", "jobs/s", "pgqueuer", ">= 2.0x"),
    "start": Figure("start to ready, `runbroker run -- true`", "ms", "python -c pass", "<= 200 ms"),
}
PART_FIGURES = {
    "memory": ("rss_demo", "rss_handler"),
    "side-by-side": ("noop_c64", "noop_seq", "true_c64", "true_seq"),
    "drain": ("drain_1", "drain_3"),
    "start": ("start",),
}


@dataclass(frozen=True)
class Sample:
    """One round's figure, its reference from the same round, and their ratio."""

    value: float
    reference: float

    @property
    def ratio(self) -> float:
        return self.value / self.reference if self.reference else float("nan")


@dataclass(frozen=True)
class Build:
    label: str
    runbroker: Path

    @property
    def python(self) -> Path:
        """The interpreter the build's ``runbroker`` script runs on (its shebang)."""
        first = self.runbroker.read_bytes().split(b"\n", 1)[0]
        if first.startswith(b"#!") and len(first.split()) == 1:
            return Path(first[2:].decode())
        return self.runbroker.with_name("python")


def find_anchor(given: str | None) -> Path:
    """``../shared/anchor`` beside the project, or beside the main checkout of a worktree."""
    if given:
        candidates = [Path(given)]
    else:
        candidates = [PROJECT.parent / "shared" / "anchor"]
        common = subprocess.run(
            ["git", "-C", str(PROJECT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if common:
            candidates.append(Path(common).parent.parent / "shared" / "anchor")
    for anchor in candidates:
        if (anchor / "side-by-side").is_file() and (anchor / "go-trigger-anchor").is_file():
            return anchor
    tried = ", ".join(str(anchor) for anchor in candidates)
    sys.exit(
        f"the Go reference broker is missing: no side-by-side and go-trigger-anchor in {tried}"
    )


def daemon_env(socket_path: Path, **settings: str) -> dict[str, str]:
    """This environment without any RUNBROKER_* of its own, plus the socket and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNBROKER_")}
    env.update(RUNBROKER_SOCKET=str(socket_path), **settings)
    return env


def accepts(socket_path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(socket_path))
        except OSError:
            return False
        return True


def wait_ready(proc: subprocess.Popen[bytes], socket_path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not accepts(socket_path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args!r} did not start")
        time.sleep(0.001)


@contextmanager
def running(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def children_of() -> dict[int, list[int]]:
    """Every process's children, from /proc (the parent is field 4 of ``stat``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    return children


def runbroker_rss_kib(pid: int) -> list[int]:
    """RSS of ``pid`` and of each descendant running the same executable (the watchdog; not a
    job's command), ``pid``'s first."""
    program = os.readlink(f"/proc/{pid}/exe")
    tree = children_of()
    found, todo = [pid], list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        todo.extend(tree.get(child, []))
        try:
            if os.readlink(f"/proc/{child}/exe") == program:
                found.append(child)
        except OSError:
            continue
    return [bench_broker.rss_kib(each) for each in found]


def idle_mib(pid: int, trigger: list[str] | None, socket_path: Path, task: str) -> list[float]:
    """After one run of ``task`` (``trigger`` when given, else the socket) and a settle."""
    if trigger:
        subprocess.run(trigger, check=True, capture_output=True)
    else:
        asyncio.run(bench_broker._round_trip(socket_path, task))
    time.sleep(SETTLE_S)
    return [kib / 1024 for kib in runbroker_rss_kib(pid)]


def go_idle_mib(anchor: Path, workdir: Path) -> float:
    go = str(anchor / "go-trigger-anchor")
    socket_path = workdir / "go.sock"
    with running(
        subprocess.Popen([go, "daemon", str(socket_path)], stderr=subprocess.DEVNULL)
    ) as p:
        wait_ready(p, socket_path)
        return sum(idle_mib(p.pid, [go, "trigger", str(socket_path)], socket_path, "default"))


def said(processes: list[float]) -> str:
    return f"{sum(processes):.1f} MiB ({' + '.join(f'{mib:.1f}' for mib in processes)})"


def measure_memory(build: Build, anchor: Path) -> dict[str, Sample]:
    with tempfile.TemporaryDirectory(prefix="rb-lean-") as tmp:
        workdir = Path(tmp)
        go_mib = go_idle_mib(anchor, workdir)
        demo_socket = workdir / "demo.sock"
        demo = subprocess.Popen(
            [str(build.runbroker), "run", "--", *DEMO_COMMAND],
            env=daemon_env(demo_socket, RUNBROKER_INTERVAL="10s"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with running(demo):
            wait_ready(demo, demo_socket)
            demo_mib = idle_mib(demo.pid, None, demo_socket, "default")
        bench_broker.RUNBROKER = str(build.runbroker)
        (workdir / "handler").mkdir()
        handler, handler_socket = bench_broker.start_daemon(workdir / "handler")
        with running(handler):
            handler_mib = idle_mib(handler.pid, None, handler_socket, "noop")
    print(
        f"  {build.label}: RSS demo {said(demo_mib)}, handler {said(handler_mib)}, Go {go_mib:.1f}"
    )
    return {
        "rss_demo": Sample(sum(demo_mib), go_mib),
        "rss_handler": Sample(sum(handler_mib), go_mib),
    }


SIDE_BY_SIDE_LINE = re.compile(
    r"^(?P<job>no-op|exec true), +(?P<load>sequential|64 clients).*?"
    r"runbroker (?P<rb>[\d.]+) ?\S+ +Go (?P<go>[\d.]+)"
)
SIDE_BY_SIDE_KEYS = {
    ("no-op", "64 clients"): "noop_c64",
    ("no-op", "sequential"): "noop_seq",
    ("exec true", "64 clients"): "true_c64",
    ("exec true", "sequential"): "true_seq",
}


def measure_side_by_side(build: Build, anchor: Path) -> dict[str, Sample]:
    env = dict(os.environ, PATH=f"{build.runbroker.parent}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run(
        [str(anchor / "side-by-side"), "1"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    ).stdout
    samples: dict[str, Sample] = {}
    for line in out.splitlines():
        if match := SIDE_BY_SIDE_LINE.match(line):
            key = SIDE_BY_SIDE_KEYS[match["job"], match["load"]]
            samples[key] = Sample(float(match["rb"]), float(match["go"]))
    if len(samples) != len(SIDE_BY_SIDE_KEYS):
        raise RuntimeError(f"side-by-side printed no figures:\n{out}")
    print(f"  {build.label}: " + ", ".join(f"{k} {s.ratio:.2f}x" for k, s in samples.items()))
    return samples


DRAIN_LINE = re.compile(
    r"^rep \d+ replicas=(?P<replicas>\d+) .*?rb +(?P<rb>[\d.]+) +pgq +(?P<pgq>[\d.]+)"
)


def check_drain_ready(build: Build) -> None:
    """The drain's worker processes run on the build's own interpreter, with pgqueuer."""
    found = subprocess.run([str(build.python), "-c", "import pgqueuer"], capture_output=True)
    if found.returncode != 0:
        sys.exit(f"{build.label}: {build.python} lacks pgqueuer (install the build with [bench])")


def measure_drain(build: Build, jobs: int) -> dict[str, Sample]:
    script = str(BENCH_DIR / "bench_pgrunner.py")
    out = subprocess.run(
        [str(build.python), script, "--reps", "1", "--parts", "drain", "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    ).stdout
    samples = {
        f"drain_{m['replicas']}": Sample(float(m["rb"]), float(m["pgq"]))
        for line in out.splitlines()
        if (m := DRAIN_LINE.match(line))
    }
    if set(samples) != {"drain_1", "drain_3"}:
        raise RuntimeError(f"bench_pgrunner.py printed no drain figures:\n{out}")
    print(f"  {build.label}: " + ", ".join(f"{k} {s.ratio:.2f}x" for k, s in samples.items()))
    return samples


def start_to_ready_ms(build: Build, workdir: Path) -> float:
    socket_path = workdir / "start.sock"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(build.runbroker), "run", "--", "true"],
        env=daemon_env(socket_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with running(proc):
        wait_ready(proc, socket_path)
        return (time.perf_counter() - started) * 1000


def measure_start(build: Build) -> dict[str, Sample]:
    ready_ms: list[float] = []
    python_ms: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rb-lean-") as tmp:
        for _ in range(STARTS_PER_ROUND):
            ready_ms.append(start_to_ready_ms(build, Path(tmp)))
            started = time.perf_counter()
            subprocess.run([str(build.python), "-c", "pass"], check=True)
            python_ms.append((time.perf_counter() - started) * 1000)
    sample = Sample(statistics.median(ready_ms), statistics.median(python_ms))
    print(
        f"  {build.label}: start to ready {sample.value:.0f} ms, python -c pass "
        f"{sample.reference:.0f} ms, {sample.ratio:.1f}x (medians of {STARTS_PER_ROUND})"
    )
    return {"start": sample}


def spread(values: list[float], digits: int) -> str:
    low, middle, high = (
        f"{value:.{digits}f}" for value in (min(values), statistics.median(values), max(values))
    )
    return f"{middle} ({low}-{high})"


def report(results: dict[str, dict[str, list[Sample]]], rounds: int) -> None:
    print(f"\nmedian (min-max) of {rounds} round(s); ratio = figure / reference, within a round")
    for key, by_build in results.items():
        figure = FIGURES[key]
        digits = 1 if figure.unit in ("MiB", "ms") else 0
        print(f"{figure.title} (goal {figure.goal})")
        for label, samples in by_build.items():
            value = spread([s.value for s in samples], digits)
            reference = spread([s.reference for s in samples], digits)
            print(
                f"  {label:>8}: {value} {figure.unit}  {figure.reference} {reference} "
                f"{figure.unit}  ratio {spread([s.ratio for s in samples], 2)}x"
            )


def builds_given(items: list[str]) -> list[Build]:
    if not items:
        on_path = subprocess.run(
            ["sh", "-c", "command -v runbroker"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if not on_path:
            sys.exit("runbroker is not on PATH (install the project, or give --runbroker)")
        return [Build("this", Path(on_path))]
    builds = [Build(label, Path(path)) for label, _, path in (i.partition("=") for i in items)]
    for build in builds:
        if not os.access(build.runbroker, os.X_OK):
            sys.exit(f"{build.label}: {build.runbroker} is not an executable")
    return builds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runbroker", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--anchor", help="the Go reference broker's directory")
    parser.add_argument("--drain-jobs", type=int, default=10_000)
    args = parser.parse_args()
    parts = [part for part in PARTS if part in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(PARTS)
    if unknown or not parts:
        sys.exit(f"--only takes {', '.join(PARTS)}; not {', '.join(sorted(unknown))}")
    builds = builds_given(args.runbroker)
    anchor = find_anchor(args.anchor) if {"memory", "side-by-side"} & set(parts) else Path()
    if "drain" in parts:
        for build in builds:
            check_drain_ready(build)
    for build in builds:
        print(f"{build.label}: {build.runbroker} (on {build.python})")
    measures: dict[str, Callable[[Build], dict[str, Sample]]] = {
        "memory": lambda build: measure_memory(build, anchor),
        "side-by-side": lambda build: measure_side_by_side(build, anchor),
        "drain": lambda build: measure_drain(build, args.drain_jobs),
        "start": measure_start,
    }
    results: dict[str, dict[str, list[Sample]]] = {
        key: {build.label: [] for build in builds} for part in parts for key in PART_FIGURES[part]
    }
    for number in range(args.rounds):
        order = builds if number % 2 == 0 else builds[::-1]
        for part in parts:
            print(f"round {number + 1}, {part}", flush=True)
            for build in order:
                for key, sample in measures[part](build).items():
                    results[key][build.label].append(sample)
            sys.stdout.flush()
    report(results, args.rounds)


if __name__ == "__main__":
    main()
