"""JSON lines (daemon/log/jsonlines.py): each line a JSON string, between the head and the tail."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.log.jsonlines import json_lines


@given(st.lists(st.text(), max_size=40))
def test_json_lines_are_each_line_as_a_json_string_between_head_and_tail(lines: list[str]) -> None:
    """Whatever the lines hold (quotes, backslashes, controls, any character, lone surrogates),
    each comes out as its own JSON line: the list's JSON cut apart, or the slow path."""
    out = json_lines(b'{"k":1,"x":', lines, b"}\n")
    parsed = [json.loads(line) for line in out.split(b"\n")[:-1]]
    assert [obj["x"] for obj in parsed] == lines
    assert all(obj["k"] == 1 for obj in parsed)


@pytest.mark.parametrize(
    "lines",
    [[","], [",", "y"], ["x", ",", "y"], [",", ","], ["", "x"], [""], ["a,", ",b"]],
)
def test_a_line_of_commas_is_not_taken_for_the_boundary_between_two(lines: list[str]) -> None:
    """A line that is just "," sits between quotes like the boundary between two lines."""
    out = json_lines(b'{"x":', lines, b"}\n")
    assert [json.loads(line)["x"] for line in out.split(b"\n")[:-1]] == lines
