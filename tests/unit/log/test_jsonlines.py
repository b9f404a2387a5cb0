"""JSON lines (daemon/log/jsonlines.py): each line a JSON string, between the head and the tail."""

from __future__ import annotations

import json

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
