"""The measures of ``bench_lean.py``, one function a part: each runs one build once and
returns its figures, each beside its reference measured just before or after it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import bench_broker

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
SETTLE_S = 1.0  # after the one run, before the RSS is read: the run's leftovers are gone
STARTS_PER_ROUND = 5
# The start reference: the build's interpreter without site, so an editable install's path
# finder does not load it.
BARE_START = ["-I", "-S", "-c", "pass"]
# The README's demo runs as a container's PID 1 (``docker run``): a PID namespace of its own, the
# daemon stopped by SIGTERM as ``docker stop`` would, and killed with unshare if the bench fails.
AS_PID_1 = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
DEMO_COMMAND = ["sh", "-c", 'echo "hello from run $RUNBROKER_RUN_ID"']


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
    """A runbroker install to measure, by the label it is reported under."""

    label: str
    runbroker: Path

    @property
    def python(self) -> Path:
        """The interpreter the build's ``runbroker`` script runs on (its shebang)."""
        first = self.runbroker.read_bytes().split(b"\n", 1)[0]
        if first.startswith(b"#!") and len(first.split()) == 1:
            return Path(first[2:].decode())
        return self.runbroker.with_name("python")


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


def pid_1_of(unshare_pid: int) -> int:
    """The daemon ``unshare --fork`` started: its one child, PID 1 of the new namespace."""
    (child,) = children_of()[unshare_pid]
    return child


def said(processes: list[float]) -> str:
    return f"{sum(processes):.1f} MiB ({' + '.join(f'{mib:.1f}' for mib in processes)})"


def measure_memory(build: Build, anchor: Path) -> dict[str, Sample]:
    with tempfile.TemporaryDirectory(prefix="rb-lean-") as tmp:
        workdir = Path(tmp)
        go_mib = go_idle_mib(anchor, workdir)
        demo_socket = workdir / "demo.sock"
        demo = subprocess.Popen(
            [*AS_PID_1, str(build.runbroker), "run", "--", *DEMO_COMMAND],
            env=daemon_env(demo_socket, RUNBROKER_INTERVAL="10s"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_ready(demo, demo_socket)
            daemon_pid = pid_1_of(demo.pid)
            demo_mib = idle_mib(daemon_pid, None, demo_socket, "default")
            os.kill(daemon_pid, signal.SIGTERM)  # unshare ignores SIGTERM while it waits
            demo.wait(timeout=60)
        finally:
            if demo.poll() is None:
                demo.kill()  # --kill-child: the daemon goes with it
                demo.wait()
        bench_broker.RUNBROKER = str(build.runbroker)
        (workdir / "handler").mkdir()
        handler, handler_socket = bench_broker.start_daemon(workdir / "handler")
        with running(handler):
            wait_ready(handler, handler_socket)  # start_daemon waits for the file, not listen()
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
            subprocess.run([str(build.python), *BARE_START], check=True)
            python_ms.append((time.perf_counter() - started) * 1000)
    sample = Sample(statistics.median(ready_ms), statistics.median(python_ms))
    print(
        f"  {build.label}: start to ready {sample.value:.0f} ms, python -I -S -c pass "
        f"{sample.reference:.0f} ms, {sample.ratio:.1f}x (medians of {STARTS_PER_ROUND})"
    )
    return {"start": sample}
