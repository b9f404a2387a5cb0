"""Contending processes started from coord_worker.py beside this file, released at once through
their pipes, and the coord's log lines: what the coord's tests share."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("coord_worker.py")


def spawn_worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def race(argv_per_worker: list[list[str]]) -> list[str]:
    """Start every worker, wait until all are ready, release them at once, return their output."""
    procs = [spawn_worker(*argv) for argv in argv_per_worker]
    try:
        for proc in procs:
            assert read_line(proc) == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0] * len(procs)
    return outputs


@pytest.fixture
def held_worker() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Spawn holder processes; any still alive at the end are killed."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = spawn_worker(*args)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


LogLines = list[MutableMapping[str, Any]]  # the unit tier's ``logs``: each line as a dict


def decisions_in(logs: LogLines) -> list[str]:
    return [str(line.get("coord_decision", "")) for line in logs]


def log_lines(logs: LogLines, *fields: str) -> list[tuple[object, ...]]:
    """Each line as (event, dir, the named fields): the fields are the line's, not text."""
    return [(line["event"], line.get("dir"), *(line.get(f) for f in fields)) for line in logs]


def always_open() -> bool:
    return True
