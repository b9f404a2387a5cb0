"""What a container pays (memory, round trips, drain, start), each beside its same-run reference.

    python bench/bench_lean.py [--rounds 3] [--only memory,side-by-side,drain,start]
    python bench/bench_lean.py --runbroker before=OLD_VENV/bin/runbroker \\
        --runbroker after=NEW_VENV/bin/runbroker

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
  against ``python -I -S -c pass`` of the same interpreter (a bare start: the machine's own
  cost of starting a process), alternated.

The anchor is ``../shared/anchor/`` beside the project (or beside the main checkout of a git
worktree), or ``--anchor DIR``; when it is missing the script says so and exits 1. A regular
install (``pip install .``, not editable) measures what users get.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_lean_parts import (
    PROJECT,
    Build,
    Sample,
    check_drain_ready,
    measure_drain,
    measure_memory,
    measure_side_by_side,
    measure_start,
)

PARTS = ("memory", "side-by-side", "drain", "start")


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
    "start": Figure(
        "start to ready, `runbroker run -- true`", "ms", "python -I -S -c pass", "<= 200 ms"
    ),
}
PART_FIGURES = {
    "memory": ("rss_demo", "rss_handler"),
    "side-by-side": ("noop_c64", "noop_seq", "true_c64", "true_seq"),
    "drain": ("drain_1", "drain_3"),
    "start": ("start",),
}


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


def spread(values: list[float], digits: int) -> str:
    low, middle, high = (
        f"{value:.{digits}f}" for value in (min(values), statistics.median(values), max(values))
    )
    return f"{middle} ({low}-{high})"


def said_of(failure: BaseException) -> str:
    """A failed measure in a few lines: a failed command's last lines of output."""
    if isinstance(failure, subprocess.CalledProcessError):
        output = f"{failure.stdout or ''}{failure.stderr or ''}".strip().splitlines()
        return f"{failure.cmd!r} exited {failure.returncode}: " + " | ".join(output[-5:])
    return f"{type(failure).__name__}: {failure}"


def report(results: dict[str, dict[str, list[Sample]]], rounds: int) -> None:
    print(f"\nmedian (min-max) of {rounds} round(s); ratio = figure / reference, within a round")
    for key, by_build in results.items():
        figure = FIGURES[key]
        digits = 1 if figure.unit in ("MiB", "ms") else 0
        print(f"{figure.title} (goal {figure.goal})")
        for label, samples in by_build.items():
            if not samples:
                print(f"  {label:>8}: no round measured it")
                continue
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
    if args.rounds < 1:
        sys.exit("--rounds takes 1 or more")
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
                try:
                    samples = measures[part](build)
                except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
                    print(f"  {build.label}: {part} failed this round: {said_of(exc)}")
                    continue
                for key, sample in samples.items():
                    results[key][build.label].append(sample)
            sys.stdout.flush()
    report(results, args.rounds)


if __name__ == "__main__":
    main()
