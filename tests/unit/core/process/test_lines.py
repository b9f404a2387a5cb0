"""A child's output cut into lines (daemon/core/process/lines.py): both streams in order, long
lines in pieces without loss, a cut never inside a character, a read's lines together."""

from __future__ import annotations

import itertools
import unittest.mock

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.process import CommandOutcome
from daemon.core.process.lines import LINE_LIMIT_BYTES, LineSplitter
from tests.unit.core.process.running import Lines, run_command


async def test_stdout_and_stderr_are_both_streamed_in_order() -> None:
    lines: Lines = []
    outcome = await run_command(
        ["sh", "-c", "echo one; echo two >&2; printf 'crlf\\r\\n'; printf 'no newline'; exit 4"],
        lines,
    )
    assert outcome == CommandOutcome(4)
    assert [line for stream, line in lines if stream == "stdout"] == ["one", "crlf", "no newline"]
    assert [line for stream, line in lines if stream == "stderr"] == ["two"]


async def test_long_lines_arrive_in_pieces_without_loss() -> None:
    # 100 000 bytes ends with its newline just past the limit; 200 001 spans several pieces.
    script = (
        "head -c 100000 /dev/zero | tr '\\0' a; echo;"
        "head -c 200001 /dev/zero | tr '\\0' b; echo;"
        "echo tail"
    )
    lines: Lines = []
    assert await run_command(["sh", "-c", script], lines) == CommandOutcome(0)
    pieces = [line for _stream, line in lines]
    assert pieces[-1] == "tail"
    assert all(pieces), f"an empty piece was emitted: {[len(p) for p in pieces]}"
    body = pieces[:-1]
    assert len(body) >= 3, "the long lines were not split"
    assert "".join(body) == "a" * 100_000 + "b" * 200_001
    # No piece mixes the two lines: a piece never straddles a newline.
    assert all(set(piece) in ({"a"}, {"b"}) for piece in body)


async def test_multibyte_characters_survive_the_cut_at_the_limit() -> None:
    # Three lines of 3-byte characters behind 0, 1 and 2 ASCII bytes: whatever the offsets of
    # the cuts, at least one of them falls inside a character.
    texts = [prefix + "\u20ac" * 70_000 for prefix in ("", "a", "ab")]
    code = "import sys\nfor p in ('', 'a', 'ab'): sys.stdout.write(p + '\\u20ac' * 70000 + '\\n')"
    lines: Lines = []
    assert await run_command(["python3", "-c", code], lines) == CommandOutcome(0)
    pieces = [line for _stream, line in lines]
    assert "\ufffd" not in "".join(pieces)
    assert len(pieces) > 3, "no line was cut"
    assert "".join(pieces) == "".join(texts)


def _split(*chunks: bytes) -> list[str]:
    """The lines (and pieces) a stream of ``chunks`` gives, ended by EOF."""
    pieces: list[str] = []
    splitter = LineSplitter("stdout", lambda _stream, lines: pieces.extend(lines))
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    return pieces


def test_a_cut_just_before_the_newline_gives_no_empty_piece() -> None:
    line = b"a" * (2 * LINE_LIMIT_BYTES)
    pieces = _split(line + b"\n" + b"\n", b"tail\n")
    # Two full pieces, no empty third one; the empty line is the job's own.
    assert pieces == ["a" * LINE_LIMIT_BYTES, "a" * LINE_LIMIT_BYTES, "", "tail"]
    assert _split(line[:1000], line[1000:], b"\n\ntail\n") == pieces


def test_a_cut_inside_a_character_does_not_break_it() -> None:
    encoded = ("ab" + "\u20ac" * 30_000).encode()
    first, rest = encoded[: LINE_LIMIT_BYTES + 2], encoded[LINE_LIMIT_BYTES + 2 :]
    assert (LINE_LIMIT_BYTES - 2) % 3, "the cut must fall inside a character"
    pieces = _split(first, rest + b"\nnext\n")
    assert len(pieces) == 3
    assert "\ufffd" not in "".join(pieces)
    assert "".join(pieces[:-1]) == "ab" + "\u20ac" * 30_000
    assert pieces[-1] == "next"


def test_the_lines_of_one_read_reach_the_sink_together() -> None:
    calls: list[list[str]] = []
    splitter = LineSplitter("stdout", lambda _stream, lines: calls.append(lines))
    splitter.feed(b"one\ntwo\r\nthr")
    splitter.feed(b"ee\nfour\n")
    splitter.feed(b"five")
    splitter.close()
    assert calls == [["one", "two"], ["three", "four"], ["five"]]


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=40
        ),
        max_size=20,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_long_lines_in_pieces_reassemble_in_order_whatever_the_chunks(
    texts: list[str], cuts: list[int]
) -> None:
    # A small limit: many lines are cut, often inside a character, in any read.
    data = b"".join(text.encode() + b"\n" for text in texts)
    edges = [0, *sorted(cut for cut in cuts if cut < len(data)), len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(edges)]
    with unittest.mock.patch("daemon.core.process.lines.LINE_LIMIT_BYTES", 16):
        pieces = _split(*chunks)
    assert "".join(pieces) == "".join(texts)  # nothing lost, nothing replaced, in order
    assert len(pieces) >= len(texts)
    assert all(len(piece.encode()) <= 16 + 3 for piece in pieces)  # a carried character
    assert sum(1 for piece in pieces if not piece) == sum(1 for text in texts if not text)


@given(st.lists(st.binary(max_size=300), max_size=30))
def test_lines_are_the_bytes_split_at_newlines_whatever_the_chunks(chunks: list[bytes]) -> None:
    # No line here reaches the limit: each line is one piece, however the bytes were chunked.
    *lines, last = b"".join(chunks).split(b"\n")
    expected = [line.decode("utf-8", "replace").removesuffix("\r") for line in lines]
    if last:
        expected.append(last.decode("utf-8", "replace"))  # what the stream ended with
    assert _split(*chunks) == expected
