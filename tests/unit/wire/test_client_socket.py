"""How the thin client reads an answer: whatever pieces the socket gives it (a few bytes, a
frame and a half, more than its buffer holds), the same answer lines, and each batch's lines
whole."""

from __future__ import annotations

import json
from typing import Any, cast
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.wire import client_socket
from tests.support.frames import batch_frame

lines = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=40),
    max_size=30,
)
events = st.one_of(
    st.builds(lambda reason: {"event": "overdue", "ok": True, "reason": reason}, st.text()),
    st.builds(
        lambda stream, lines: ("batch", stream, lines), st.sampled_from(["out", "err"]), lines
    ),
)


class PiecesSocket:
    """A socket that gives ``data`` in pieces of the next of ``sizes`` bytes (at most)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data = data
        self.sizes = sizes
        self.at = 0
        self.reads = 0

    def settimeout(self, _timeout: float | None) -> None:
        pass

    def recv_into(self, view: memoryview, most: int) -> int:
        if most > len(view):  # as a socket's: "buffer too small for requested bytes"
            raise ValueError(f"a read of {most} bytes into {len(view)}")
        size = min(most, self.sizes[self.reads % len(self.sizes)])
        self.reads += 1
        piece = self.data[self.at : self.at + size]
        view[: len(piece)] = piece
        self.at += len(piece)
        return len(piece)


def _wire(answer: dict[str, Any] | tuple[str, str, list[str]]) -> bytes:
    if isinstance(answer, tuple):
        return batch_frame("r1", answer[1], *answer[2])
    return json.dumps(answer).encode() + b"\n"


def _expected(answer: dict[str, Any] | tuple[str, str, list[str]]) -> tuple[str, Any]:
    if isinstance(answer, tuple):
        return answer[1], "".join(f"{line}\n" for line in answer[2]).encode()
    return "overdue", answer["reason"]


@settings(max_examples=300, deadline=None)
@given(
    answers=st.lists(events, max_size=12),
    sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8),
    first_bytes=st.integers(1, 64),
    recv_bytes=st.integers(1, 300),
)
def test_every_answer_line_and_batch_arrives_whole_in_order_however_the_bytes_come(
    answers: list[dict[str, Any] | tuple[str, str, list[str]]],
    sizes: list[int],
    first_bytes: int,
    recv_bytes: int,
) -> None:
    """Whatever the reads' sizes, and the client's first read size and its growth to the
    largest (``FIRST_READ_BYTES``, ``RECV_BYTES``)."""
    data = b"".join(map(_wire, answers))
    sock = PiecesSocket(data, sizes)
    with (
        mock.patch.object(client_socket, "FIRST_READ_BYTES", first_bytes),
        mock.patch.object(client_socket, "RECV_BYTES", recv_bytes),
    ):
        connection = client_socket.Connection(cast(Any, sock))
        got = []
        for event in connection.events(None, batches=True):
            if event["event"] == "output":
                got.append((event["stream"], bytes(event["data"])))
            else:
                got.append(("overdue", event["reason"]))
    assert got == [_expected(answer) for answer in answers]
    assert sock.at == len(data)


def test_a_batch_larger_than_the_buffer_grows_it_and_arrives_whole() -> None:
    """A batch of more than the client's buffer (four reads' worth) is still one batch."""
    big = ["x" * 99] * 50  # 5,000 bytes, against a buffer of 4 * 16
    data = batch_frame("r1", "stdout", *big) + b'{"event":"done","ok":true,"id":"r1"}\n'
    with mock.patch.object(client_socket, "RECV_BYTES", 16):
        connection = client_socket.Connection(cast(Any, PiecesSocket(data, [7, 16, 3])))
        got = [
            (event["event"], bytes(event.get("data", b"")))
            for event in connection.events(None, batches=True)
        ]
    assert got == [("output", "".join(f"{line}\n" for line in big).encode()), ("done", b"")]


def test_a_batchs_lines_are_a_view_that_lasts_until_the_next_answer_line() -> None:
    """Read in place, not copied: kept past the next answer line, the view says so at once
    rather than show the bytes a later read put there."""
    data = batch_frame("r1", "stdout", "one") + batch_frame("r1", "stdout", "two")
    connection = client_socket.Connection(cast(Any, PiecesSocket(data, [4096])))
    events = connection.events(None, batches=True)
    first = next(events)
    assert bytes(first["data"]) == b"one\n"
    second = next(events)
    assert bytes(second["data"]) == b"two\n"
    with pytest.raises(ValueError, match="released"):
        bytes(first["data"])
