"""The trigger fast path agrees with argparse whenever it answers at all."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from daemon.face.cli import parse_words
from daemon.face.fastargs import parse_trigger
from daemon.face.parser import duration_arg

tokens = st.sampled_from(
    [
        "--arg",
        "--env",
        "--detach",
        "--json",
        "--timeout",
        "--socket",
        "--arg=x",
        "--env=K=V",
        "--timeout=5s",
        "-h",
        "--det",
        "--",
        "report",
        "K=V",
        "A=",
        "=V",
        "5s",
        "-x",
        "--flag",
        "--arg=--flag",
        "/tmp/s.sock",
        "",
    ]
)


def _valid_timeout(text: str) -> bool:
    try:
        duration_arg(text)
    except argparse.ArgumentTypeError:
        return False
    return True


def _argparse(words: list[str]) -> argparse.Namespace | None:
    try:
        parsed, extra = parse_words(["trigger", *words])
    except SystemExit:
        return None
    return None if extra else parsed


@given(st.lists(tokens, max_size=8))
def test_fast_path_matches_argparse(words: list[str]) -> None:
    fast = parse_trigger(words)
    if fast is None or (fast.timeout is not None and not _valid_timeout(fast.timeout)):
        return  # the CLI lets argparse decide (and word the error); nothing to compare
    slow = _argparse(words)
    assert slow is not None, f"fast path accepted what argparse rejects: {words}"
    assert fast.task == slow.task
    assert list(fast.args) == slow.args
    assert list(fast.env) == slow.env
    assert fast.detach == slow.detach
    assert fast.as_json == slow.json
    assert fast.socket == slow.socket
    assert (fast.timeout is None) == (slow.timeout is None)


def test_plain_forms_take_the_fast_path() -> None:
    parsed = parse_trigger(["report", "--arg", "a", "--env", "K=V", "--detach", "--json"])
    assert parsed is not None
    assert parsed.task == "report"
    assert parsed.args == ("a",)
    assert parsed.env == (("K", "V"),)
    assert parsed.detach
    assert parsed.as_json


def test_unusual_forms_fall_back() -> None:
    unusual = (
        ["-h"],
        ["--det"],
        ["a", "b"],
        ["--arg"],
        ["--env", "novalue"],
        ["--arg", "--"],
        ["--timeout", "bad", "--timeout=5s"],  # argparse checks every occurrence
    )
    for words in unusual:
        assert parse_trigger(words) is None, words


def test_a_value_that_starts_with_a_dash_is_taken_by_both_parsers() -> None:
    words = ["report", "--arg", "--flag", "--arg", "-x", "--env", "K=-v"]
    fast = parse_trigger(words)
    assert fast is not None
    assert fast.args == ("--flag", "-x")
    assert fast.env == (("K", "-v"),)
    slow = _argparse([*words, "--det"])  # an abbreviation sends a trigger through argparse
    assert slow is not None
    assert slow.args == ["--flag", "-x"]
    assert slow.env == [("K", "-v")]
    assert slow.detach
