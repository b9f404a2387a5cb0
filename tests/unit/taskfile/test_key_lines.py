"""The line each key of a tasks file is set on (daemon/taskfile/key_lines.py): under a table
header, as a dotted key, in an inline table, past strings, arrays and comments that look like
keys; over generated documents, and never an exception for any text."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.taskfile.key_lines import KeyPath, key_lines

VALUES = [
    '"x"',
    "'x'",
    '"a # b = c"',
    "'''\nfake = 1\n[tasks.fake]\n'''",
    '"""\nfake = "2"\n"""',
    "[1,\n  2, # fake = 3\n]",
    "{ inner = 1 }",
    "1979-05-27 07:32:00Z",
    "true",
    "3.5",
]
NAMES = ["a", "b-2", "x.y", "with space"]
KEYS = ["command", "schedule", "tz", "on_busy", "url"]


def _name(name: str) -> str:
    return name if name.replace("-", "").isalnum() else f'"{name}"'


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, dict[KeyPath, int]]:
    """A tasks file's text and the line each task's keys are on, laid out in every way TOML
    allows: dotted keys and inline tables at the root first, then tables under headers."""
    lines: list[str] = ["# generated"]
    where: dict[KeyPath, int] = {}
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    layouts = {name: draw(st.sampled_from(["dotted", "inline", "header"])) for name in names}
    for name in sorted(names, key=lambda n: layouts[n] == "header"):
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True, min_size=1, max_size=4))
        values = [draw(st.sampled_from(VALUES)) for _ in keys]
        if layouts[name] == "header":
            lines.append(f"[ tasks . {_name(name)} ]  # its table")
            for key, value in zip(keys, values, strict=True):
                where[("tasks", name, key)] = len(lines) + 1
                lines.extend(f"{key} = {value}".split("\n"))
            lines.append(f"[tasks.{_name(name)}.notify]  # a table after it")
            lines.append("max_silence = 'auto'")
        elif layouts[name] == "dotted":
            for key, value in zip(keys, values, strict=True):
                where[("tasks", name, key)] = len(lines) + 1
                lines.extend(f"tasks.{_name(name)}.{key} = {value}".split("\n"))
        else:
            pairs = ", ".join(f"{key} = {value}" for key, value in zip(keys, values, strict=True))
            text = f"tasks.{_name(name)} = {{ {pairs} }}"
            first = len(lines) + 1
            for key, value in zip(keys, values, strict=True):
                before = text[: text.index(f"{key} = {value}")]
                where[("tasks", name, key)] = first + before.count("\n")
            lines.extend(text.split("\n"))
        lines.append("")
    return "\n".join(lines) + "\n", where


@settings(max_examples=300, deadline=None)
@given(documents())
def test_each_key_is_found_on_its_own_line(document: tuple[str, dict[KeyPath, int]]) -> None:
    text, where = document
    tomllib.loads(text)  # the generator writes TOML
    found = key_lines(text)
    assert {key: found.get(key) for key in where} == where


def test_tables_are_on_their_header_or_the_key_that_opens_them() -> None:
    text = '[tasks.a]\ncommand = "x"\n[tasks]\nb.command = "y"\n\nc = { command = "z" }\n'
    found = key_lines(text)
    assert (found[("tasks",)], found[("tasks", "a")]) == (1, 1)
    assert (found[("tasks", "b")], found[("tasks", "c")]) == (4, 6)
    assert key_lines('"quoted\\u0041" = 1\n') == {("quotedA",): 1}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]{}='\"\\#.,\n abc123")), max_size=80))
def test_any_text_gives_lines_and_never_an_exception(text: str) -> None:
    for key, line in key_lines(text).items():
        assert all(isinstance(part, str) for part in key)
        assert 1 <= line <= text.count("\n") + 1
