"""``runbroker reload --dry-run --file PATH`` (daemon/face/control.py): the client reads the
candidate as the daemon reads its tasks file and sends its bytes whole; what it cannot read
is said without asking the daemon."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from daemon.face import cli
from tests.support.fake_daemon import fake_daemon

PLAN = {
    "event": "reload",
    "ok": True,
    "dry_run": True,
    "added": ["fresh"],
    "removed": [],
    "changed": [],
    "unchanged": ["keep"],
    "moves": [],
}


def test_the_candidate_s_bytes_are_sent_with_its_name(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = short_dir / "rb.sock"
    candidate = short_dir / "new.toml"
    candidate.write_bytes(b"[tasks.fresh]\ncommand = ['true']\n\xe2\x9c\x93 = 1\n")
    with fake_daemon(path, PLAN) as requests:
        code = cli.main(["reload", "--dry-run", "--file", str(candidate), "--socket", str(path)])
    assert code == 0
    (request,) = requests
    assert request["op"] == "reload"
    assert request["dry_run"] is True
    assert request["file"] == str(candidate)
    assert base64.b64decode(request["content"]) == candidate.read_bytes()
    assert "1 added (fresh)" in capsys.readouterr().out


def test_file_needs_dry_run(short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidate = short_dir / "new.toml"
    candidate.write_text("")
    assert cli.main(["reload", "--file", str(candidate), "--socket", str(short_dir / "s")]) == 2
    assert "--file needs --dry-run" in capsys.readouterr().err


def test_a_candidate_that_cannot_be_read_is_said_without_the_daemon(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    socket_path = str(short_dir / "nobody-listens.sock")
    missing = short_dir / "absent.toml"
    assert cli.main(["reload", "--dry-run", "--file", str(missing), "--socket", socket_path]) == 1
    err = capsys.readouterr().err
    assert err == f"runbroker: reload would be refused: tasks file {missing} does not exist\n"
    large = short_dir / "large.toml"
    large.write_bytes(b"#" * (1024 * 1024 + 1))
    assert cli.main(["reload", "--dry-run", "--file", str(large), "--socket", socket_path]) == 1
    assert "larger than 1024 KiB" in capsys.readouterr().err
    fifo = short_dir / "fifo.toml"
    os.mkfifo(fifo)  # never blocks: opened without waiting for a writer
    assert cli.main(["reload", "--dry-run", "--file", str(fifo), "--socket", socket_path]) == 1
    assert "not a regular file (a FIFO)" in capsys.readouterr().err


def test_a_daemon_older_than_file_says_so(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = short_dir / "rb.sock"
    candidate = short_dir / "new.toml"
    candidate.write_text("[tasks.a]\ncommand = ['true']\n")
    old = {"event": "done", "ok": False, "reason": "invalid request: unknown field 'file' (...)"}
    with fake_daemon(path, old):
        code = cli.main(["reload", "--dry-run", "--file", str(candidate), "--socket", str(path)])
    assert code == 2
    assert "does not know `reload --dry-run --file`" in capsys.readouterr().err
