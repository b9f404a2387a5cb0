"""Output benchmark: a chatty job under runbroker against the same job on its own.

Run it from a regular install, as a container has (``pip install .``; see bench_broker.py), and
read the ratios: each is measured against the job alone in the same run, because the machine is
shared and noisy. Figures are printed, never asserted.

The job is ``awk`` printing N lines of about 80 characters. It times itself (the ``duration``
below is the job's own, read from a file it writes), so a case measures what the daemon costs the
job, not the daemon's start or the client's. The cases, each for every output log mode
(``RUNBROKER_OUTPUT_LOG``: json, raw, off), on a daemon logging at ``info`` to a file as a
container's log driver would take it:

1. alone: the job, its stdout to a file (the Go reference's way: the job inherits stdout);
2. detached: a run with no client: the job's own duration;
3. attached: ``runbroker trigger chatty > file``: the trigger's wall time, and whether every
   line arrived (in the client's file and in the daemon's log);
4. followers: a detached run with F ``runbroker logs chatty -f`` readers writing to files,
   against the same daemon with no follower and against the job alone; and, as the reference of
   what following costs without runbroker on this machine, the job alone writing to a file
   that F ``tail -c +1 -f`` readers follow, each into a file of its own. The four are measured
   in turn in each round, so that the machine's noise falls on all of them alike;
5. the daemon's peak memory (VmHWM) over the cases of a size, one daemon per mode.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNBROKER = str(Path(sys.executable).with_name("runbroker"))
LINE_FORMAT = "line %07d of the chatty job, about eighty characters of text in all, padded out\\n"


def job_script(lines: int, duration_file: Path, gate: Path | None) -> str:
    """The job: (wait for the gate,) then awk's lines, timed by the job itself."""
    wait = f"read _ < {gate}; " if gate is not None else ""
    awk = f"awk 'BEGIN{{for(i=0;i<{lines};i++) printf \"{LINE_FORMAT}\", i}}'"
    return f"{wait}s=$(date +%s%N); {awk}; e=$(date +%s%N); echo $((e-s)) > {duration_file}"


def read_duration_s(path: Path) -> float:
    deadline = time.monotonic() + 600
    while True:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            path.unlink()
            return int(text) / 1e9
        if time.monotonic() > deadline:
            raise RuntimeError("the job never wrote its duration")
        time.sleep(0.005)


class Daemon:
    """One ``runbroker run`` with the chatty task, its log to a file."""

    def __init__(self, workdir: Path, lines: int, mode: str, gate: Path | None) -> None:
        self.workdir = workdir
        self.socket = workdir / "rb.sock"
        self.duration_file = workdir / "duration"
        self.log_path = workdir / f"daemon-{mode}.log"
        script = job_script(lines, self.duration_file, gate)
        tasks = workdir / "tasks.toml"
        tasks.write_text(f"[tasks.chatty]\ncommand = {json.dumps(['sh', '-c', script])}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNBROKER_")}
        env.update(
            RUNBROKER_SOCKET=str(self.socket),
            RUNBROKER_TASKS_FILE=str(tasks),
            RUNBROKER_INTERVAL="off",
            RUNBROKER_LOG_FORMAT="json",
            RUNBROKER_LOG_LEVEL="info",
            RUNBROKER_OUTPUT_LOG=mode,
        )
        self.env = env
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen([RUNBROKER, "run"], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("daemon did not start")
            time.sleep(0.01)

    def command(self, *args: str) -> list[str]:
        return [RUNBROKER, *args]

    def wait_idle(self) -> None:
        """Until the daemon runs nothing (a run's done line is logged after its duration)."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            answer = subprocess.run(
                self.command("status", "--json"), env=self.env, capture_output=True, check=True
            )
            status = json.loads(answer.stdout)
            if status.get("current") is None and not status["queue"]["waiting"]:
                return
            time.sleep(0.02)
        raise RuntimeError("the daemon stayed busy")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def socket_count(self) -> int:
        """The daemon's open sockets: its listening one, and a connection for each client."""
        count = 0
        for fd in Path(f"/proc/{self.proc.pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                count += os.readlink(fd).startswith("socket:")
        return count

    def logged_output_lines(self) -> int:
        with self.log_path.open("rb") as log:
            return sum(1 for line in log if b'"run.output"' in line)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def alone(workdir: Path, lines: int) -> tuple[float, float]:
    """The job on its own, its stdout to a file: its own duration and the wall time."""
    duration_file = workdir / "duration-alone"
    out = workdir / "alone.out"
    t0 = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run(
            ["sh", "-c", job_script(lines, duration_file, None)], stdout=sink, check=True
        )
    wall = time.perf_counter() - t0
    return read_duration_s(duration_file), wall


def count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def attached(daemon: Daemon, lines: int) -> tuple[float, float, int, str]:
    """A trigger writing to a file: its wall time, the job's duration, lines received, and
    what the client said on stderr about lost lines (if anything)."""
    out = daemon.workdir / "attached.out"
    t0 = time.perf_counter()
    with out.open("wb") as sink:
        done = subprocess.run(
            daemon.command("trigger", "chatty"), env=daemon.env, stdout=sink, stderr=subprocess.PIPE
        )
    wall = time.perf_counter() - t0
    said = " ".join(
        line for line in done.stderr.decode().splitlines() if "dropped" in line or "lost" in line
    )
    received = count_lines(out)
    out.unlink()
    return wall, read_duration_s(daemon.duration_file), received, said


def detached(daemon: Daemon) -> float:
    subprocess.run(
        daemon.command("trigger", "chatty", "--detach"),
        env=daemon.env,
        check=True,
        capture_output=True,
    )
    duration = read_duration_s(daemon.duration_file)
    daemon.wait_idle()
    return duration


def followed(daemon: Daemon, followers: int, gate: Path, lines: int) -> tuple[float, list[int]]:
    """A detached run released once ``followers`` ``logs -f`` readers follow it: the job's
    duration and the lines each follower wrote."""
    subprocess.run(
        daemon.command("trigger", "chatty", "--detach"),
        env=daemon.env,
        check=True,
        capture_output=True,
    )
    readers = []
    outs = []
    sockets = daemon.socket_count()
    for index in range(followers):
        out = daemon.workdir / f"follower-{index}.out"
        outs.append(out)
        sink = out.open("wb")
        readers.append(
            subprocess.Popen(
                daemon.command("logs", "chatty", "-f"),
                env=daemon.env,
                stdout=sink,
                stderr=subprocess.DEVNULL,
            )
        )
        sink.close()
    # Open the gate once every follower is connected, and a moment later, when its request
    # (sent at once) has been read: each follows the run from its (empty) start.
    deadline = time.monotonic() + 60
    while daemon.socket_count() < sockets + followers and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    with gate.open("w") as g:
        g.write("go\n")
    duration = read_duration_s(daemon.duration_file)
    for reader in readers:
        reader.wait(600)
    counts = [count_lines(out) for out in outs]
    for out in outs:
        out.unlink()
    daemon.wait_idle()
    return duration, counts


def tailed(workdir: Path, lines: int, followers: int) -> float:
    """The reference: the job alone writing to a file that ``followers`` ``tail -f`` readers
    follow from its first byte, each into a file of its own; the job's duration. The readers
    start (and settle) before the job, and are stopped once each has copied the whole file."""
    duration_file = workdir / "duration-tailed"
    out = workdir / "tailed.out"
    out.write_bytes(b"")
    readers = []
    copies = [workdir / f"tail-{index}.out" for index in range(followers)]
    for copy in copies:
        with copy.open("wb") as sink:
            readers.append(subprocess.Popen(["tail", "-c", "+1", "-f", str(out)], stdout=sink))
    time.sleep(0.5)
    with out.open("ab") as sink:
        subprocess.run(
            ["sh", "-c", job_script(lines, duration_file, None)], stdout=sink, check=True
        )
    duration = read_duration_s(duration_file)
    size = out.stat().st_size
    deadline = time.monotonic() + 600
    while any(copy.stat().st_size < size for copy in copies) and time.monotonic() < deadline:
        time.sleep(0.01)
    short = [count_lines(out) - count_lines(copy) for copy in copies]
    for reader in readers:
        reader.terminate()
        reader.wait(60)
    for path in (out, *copies):
        path.unlink()
    if any(short):
        raise RuntimeError(f"a tail reader missed lines: {short}")
    return duration


def report_followers(workdir: Path, lines: int, rounds: int, followers: int) -> None:
    """The job under ``followers`` ``logs -f`` readers, with none, alone, and alone under as
    many ``tail -f`` readers, a round of each in turn; medians and each round's ratios."""
    gate = workdir / "gate"
    os.mkfifo(gate)
    daemon = Daemon(workdir, lines, "json", gate)
    cases: dict[str, list[float]] = {"alone": [], "none": [], "followed": [], "tailed": []}
    short: list[int] = []
    try:
        for _ in range(rounds):
            cases["alone"].append(alone(workdir, lines)[0])
            cases["none"].append(followed(daemon, 0, gate, lines)[0])
            many, counts = followed(daemon, followers, gate, lines)
            cases["followed"].append(many)
            short.extend(lines - count for count in counts)
            cases["tailed"].append(tailed(workdir, lines, followers))
    finally:
        daemon.stop()
        gate.unlink()
    medians = {name: statistics.median(values) for name, values in cases.items()}
    alone_s, none_s = medians["alone"], medians["none"]
    print(
        f"[json] {followers} followers, medians: alone {alone_s:.3f} s, runbroker with no "
        f"follower {none_s:.3f} s, with {followers} logs -f {medians['followed']:.3f} s, alone "
        f"with {followers} tail -f {medians['tailed']:.3f} s; lines missing from a follower "
        f"{max(short, default=0)}"
    )
    print(
        f"  logs -f / runbroker with none {medians['followed'] / none_s:.2f}x"
        f" (each round {_ratios(cases['followed'], cases['none'])});"
        f" logs -f / alone {medians['followed'] / alone_s:.2f}x"
        f" ({_ratios(cases['followed'], cases['alone'])});"
        f" reference: tail -f / alone {medians['tailed'] / alone_s:.2f}x"
        f" ({_ratios(cases['tailed'], cases['alone'])})"
    )


def _ratios(values: list[float], bases: list[float]) -> str:
    return " ".join(f"{value / base:.2f}" for value, base in zip(values, bases, strict=True))


def report_size(workdir: Path, lines: int, rounds: int, followers: int, modes: list[str]) -> None:
    print(f"\n== {lines:,} lines of about 80 characters ({rounds} rounds, medians) ==")
    base_durations = []
    base_walls = []
    for _ in range(rounds):
        duration, wall = alone(workdir, lines)
        base_durations.append(duration)
        base_walls.append(wall)
    job_s = statistics.median(base_durations)
    job_wall_s = statistics.median(base_walls)
    print(f"alone: job {job_s:.3f} s, wall {job_wall_s:.3f} s (its stdout to a file)")
    for mode in modes:
        daemon = Daemon(workdir, lines, mode, None)
        try:
            det = statistics.median(detached(daemon) for _ in range(rounds))
            results = [attached(daemon, lines) for _ in range(rounds)]
            wall = statistics.median(r[0] for r in results)
            att_job = statistics.median(r[1] for r in results)
            lost = [lines - r[2] for r in results]
            said = next((r[3] for r in results if r[3]), "")
            daemon.wait_idle()
            logged = daemon.logged_output_lines() if mode == "json" else None
            peak = daemon.peak_rss_mib()
        finally:
            daemon.stop()
        runs = 2 * rounds
        print(
            f"[{mode}] detached: job {det:.3f} s = {det / job_s:.2f}x alone | attached: wall "
            f"{wall:.3f} s = {wall / job_wall_s:.2f}x alone's wall, job {att_job / job_s:.2f}x"
            f" | lines lost by the client per round {lost}{' (said: ' + said + ')' if said else ''}"
            + (f" | run.output lines logged {logged:,} of {lines * runs:,}" if logged else "")
            + f" | daemon peak RSS {peak:.1f} MiB"
        )
    if followers:
        report_followers(workdir, lines, rounds, followers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--followers", type=int, default=10)
    parser.add_argument(
        "--modes",
        nargs="*",
        default=["json", "raw", "off"],
        help="the output log modes of the detached and attached cases (none: followers only)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rb-out-", dir="/tmp") as tmp:
        for lines in args.lines:
            report_size(Path(tmp), lines, args.rounds, args.followers, args.modes)


if __name__ == "__main__":
    main()
