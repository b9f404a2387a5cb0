"""Output to a pipe whose reader leaves early (daemon/face/pipe_end.py): dropped quietly once
the reader has gone, whole until then."""

from __future__ import annotations

import os

from daemon.face.pipe_end import DropOnceClosed


def test_writes_reach_the_reader_until_it_goes_then_are_dropped_quietly() -> None:
    read_end, write_end = os.pipe()
    try:
        out = DropOnceClosed(write_end)
        assert out.write(b"first\n") == 6
        assert os.read(read_end, 100) == b"first\n"
        assert not out.reader_gone
        os.close(read_end)
        assert out.write(b"x" * 100_000) == 100_000  # EPIPE: taken and dropped
        assert out.reader_gone
        assert out.write(b"more\n") == 5
    finally:
        os.close(write_end)
