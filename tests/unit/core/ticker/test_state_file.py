"""The state file's model: whatever bytes or JSON are found, reading them gives values within
their bounds or one ``StateFileRefused`` of one line, never another exception; what the daemon
writes (and what older daemons wrote) reads back as it was."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.ticker.state_file import (
    FORMAT,
    LAST_PLANNED_MAX_S,
    LAST_PLANNED_MIN_S,
    STATE_BYTES_MAX,
    TASK_NAME_CHARS_MAX,
    VERSION,
    SavedState,
    StateFileRefused,
    encode_state,
    parse_state,
)


def _document(tasks: object, **more: object) -> bytes:
    return json.dumps({"format": FORMAT, "version": VERSION, "tasks": tasks, **more}).encode()


def _held_in_bounds(saved: SavedState) -> None:
    for task, at in saved.last_planned.items():
        assert 1 <= len(task) <= TASK_NAME_CHARS_MAX
        assert math.isfinite(at)
        assert LAST_PLANNED_MIN_S <= at <= LAST_PLANNED_MAX_S
        datetime.fromtimestamp(at, UTC)  # every value is a time datetime holds
    assert all(1 <= len(task) <= TASK_NAME_CHARS_MAX for task in saved.failing)


def _read(data: bytes) -> None:
    """What ``open`` does with the bytes: a state within bounds, or a one-line refusal."""
    try:
        saved = parse_state(data)
    except StateFileRefused as refused:
        assert str(refused)
        assert "\n" not in str(refused)
        assert len(str(refused)) < 400
        return
    _held_in_bounds(saved)


HOSTILE = {
    "200,000 nested [": b"[" * 200_000,
    "200,000 nested { in a task": _document({"t": {}}).replace(b"{}", b'{"a":' * 200_000),
    "a last_planned of 400 digits": _document({"t": {"last_planned": 0}}).replace(
        b": 0}", b": " + b"9" * 400 + b"}"
    ),
    "a cron task's -1e12": _document({"t": {"last_planned": -1e12}}),
    "an interval task's -1e300": _document({"t": {"last_planned": -1e300}}),
    "1e308": _document({"t": {"last_planned": 1e308}}),
    "Infinity": _document({"t": {"last_planned": 0}}).replace(b": 0}", b": Infinity}"),
    "NaN": _document({"t": {"last_planned": 0}}).replace(b": 0}", b": NaN}"),
    "a string": _document({"t": {"last_planned": "1700000000"}}),
    "true": _document({"t": {"last_planned": True}}),
    "an empty name": _document({"": {"last_planned": 1.0}}),
    "a name of 201 characters": _document({"x" * 201: {"last_planned": 1.0}}),
    "a name of a megabyte": _document({"x" * 1_000_000: {"last_planned": 1.0}}),
    "an unknown key": _document({"t": {"last_planned": 1.0, "more": 1}}),
    "failing not a list": _document({}, failing="t"),
    "a failing name of 201 characters": _document({}, failing=["x" * 201]),
    "not UTF-8": b"\xff\xfe",
    "a JSON array": b"[]",
    "another format": json.dumps({"format": "other", "version": 1, "tasks": {}}).encode(),
    "another version": json.dumps({"format": FORMAT, "version": 99, "tasks": {}}).encode(),
    "tasks a list": _document([]),
    "too large": b" " * (STATE_BYTES_MAX + 1),
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_file_is_one_line_refusal(content: bytes) -> None:
    with pytest.raises(StateFileRefused) as refused:
        parse_state(content)
    assert "\n" not in str(refused.value)
    assert len(str(refused.value)) < 400  # a megabyte's key is not echoed whole


def test_the_refusal_names_the_value_and_its_bound() -> None:
    with pytest.raises(StateFileRefused, match=r"tasks\.nightly\.last_planned: .*greater than"):
        parse_state(_document({"nightly": {"last_planned": -1e12}}))
    with pytest.raises(StateFileRefused, match="recursion limit"):
        parse_state(b"[" * 200_000)


def test_what_an_older_daemon_wrote_reads_back() -> None:
    older = b'{\n "format": "runbroker.slots",\n "version": 1,\n "tasks": {\n  "nightly": {\n'
    older += (
        b'   "last_planned": 1780000000.0\n  },\n  "hourly": {"last_planned": 1780003600}\n }\n}\n'
    )
    saved = parse_state(older)
    assert saved.last_planned == {"nightly": 1_780_000_000.0, "hourly": 1_780_003_600.0}
    assert saved.failing == set()


def test_without_failing_tasks_the_file_is_as_older_daemons_wrote_it() -> None:
    written = json.loads(encode_state(SavedState({"nightly": 1.5})))
    assert written == {
        "format": FORMAT,
        "version": VERSION,
        "tasks": {"nightly": {"last_planned": 1.5}},
    }


names = st.text(min_size=1, max_size=TASK_NAME_CHARS_MAX)
times = st.floats(min_value=LAST_PLANNED_MIN_S, max_value=LAST_PLANNED_MAX_S)


@given(st.dictionaries(names, times, max_size=8), st.sets(names, max_size=8))
def test_what_is_written_reads_back_as_it_was(planned: dict[str, float], failing: set[str]) -> None:
    saved = parse_state(encode_state(SavedState(planned, failing)))
    assert saved == SavedState(planned, failing)


@settings(max_examples=300)
@given(st.binary(max_size=2048))
def test_any_bytes_are_read_or_refused(data: bytes) -> None:
    _read(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(json_values)
def test_any_json_is_read_or_refused(value: Any) -> None:
    _read(json.dumps(value).encode())


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.text(max_size=210),
        st.dictionaries(st.sampled_from(["last_planned", "x"]), json_values, max_size=2),
        max_size=4,
    ),
    json_values,
)
def test_any_values_in_the_files_shape_are_read_or_refused(tasks: Any, failing: Any) -> None:
    _read(_document(tasks))
    _read(_document(tasks, failing=failing))


@given(st.integers(min_value=-(10**400), max_value=10**400) | st.floats())
def test_any_number_as_a_last_planned_is_read_or_refused(number: int | float) -> None:
    _read(_document({"t": {"last_planned": number}}))
