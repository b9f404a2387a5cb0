"""The state directory's file, ``slots.json``: its typed model, read and written.

Anything may be found in the file (another program's, a torn copy, a hostile one), so every
value it can hold has bounds here, checked by one pydantic model before any of it is used: a
time is finite and within the years ``datetime`` and the schedule walk handle, a name is
bounded, and a file larger than the cap is refused before it is parsed (the JSON parser bounds
the nesting). Whatever is wrong is one ``StateFileRefused`` of one line, never a crash.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FORMAT = "runbroker.slots"
VERSION = 1
STATE_BYTES_MAX = 4 * 1024 * 1024  # a larger file is not one this daemon wrote
TASK_NAME_CHARS_MAX = 200
TASKS_MAX = 100_000
LAST_PLANNED_MIN_S = 0.0  # 1970-01-01T00:00:00Z: no slot this daemon planned is older
LAST_PLANNED_MAX_S = datetime(9999, 1, 1, tzinfo=UTC).timestamp()  # within datetime's years
SHOWN_CHARS_MAX = 40  # of a key from the file, in the one line that says what is wrong


class StateFileRefused(ValueError):
    """The file is not one this daemon wrote; ``str(err)`` is one line saying why."""


TaskName = Annotated[str, Field(min_length=1, max_length=TASK_NAME_CHARS_MAX)]
UnixSeconds = Annotated[float, Field(ge=LAST_PLANNED_MIN_S, le=LAST_PLANNED_MAX_S)]


class _TaskEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    last_planned: UnixSeconds  # the task's newest planned slot, Unix seconds


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    format: Literal["runbroker.slots"]
    version: Literal[1]
    tasks: Annotated[dict[TaskName, _TaskEntry], Field(max_length=TASKS_MAX)]
    # tasks whose last run failed, for the notifications' ``recovery``; absent in older files
    failing: Annotated[list[TaskName], Field(max_length=TASKS_MAX)] = []


@dataclass
class SavedState:
    """What the file holds: each ticking task's last planned slot, and the failing tasks."""

    last_planned: dict[str, float] = field(default_factory=dict)  # task: Unix seconds
    failing: set[str] = field(default_factory=set)


def _where(location: tuple[int | str, ...]) -> str:
    """A value's place in the file, each key cut short: a key may be anything."""
    parts = [str(part) if str(part).isprintable() else repr(part) for part in location]
    return ".".join(p if len(p) <= SHOWN_CHARS_MAX else p[:SHOWN_CHARS_MAX] + "..." for p in parts)


def _one_line(error: ValidationError) -> str:
    """The first problem, without the value that was found (it may be huge, or anything)."""
    errors = error.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    where = _where(tuple(first["loc"]))
    said = first["msg"].replace("\n", " ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {said}{more}" if where else f"{said}{more}"


def parse_state(data: bytes) -> SavedState:
    """The file's content checked against the model; ``StateFileRefused`` saying why not."""
    if len(data) > STATE_BYTES_MAX:
        raise StateFileRefused(f"larger than {STATE_BYTES_MAX} bytes")
    try:
        document = _Document.model_validate_json(data)
    except ValidationError as exc:
        raise StateFileRefused(_one_line(exc)) from None
    except (ValueError, RecursionError, OverflowError, MemoryError) as exc:
        raise StateFileRefused(f"cannot be read ({type(exc).__name__})") from None
    planned = {task: entry.last_planned for task, entry in document.tasks.items()}
    return SavedState(planned, set(document.failing))


def encode_state(saved: SavedState) -> bytes:
    """The file's content for ``saved``: what ``parse_state`` reads back as it was."""
    document: dict[str, object] = {
        "format": FORMAT,
        "version": VERSION,
        "tasks": {task: {"last_planned": at} for task, at in sorted(saved.last_planned.items())},
    }
    if saved.failing:
        document["failing"] = sorted(saved.failing)
    return json.dumps(document, indent=1).encode() + b"\n"


def read_regular(path: Path) -> bytes | None:
    """The file's bytes; None when absent. A FIFO, a device or a symlink is refused unopened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise StateFileRefused(f"cannot be opened as a plain file ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateFileRefused("not a regular file")
        if info.st_size > STATE_BYTES_MAX:
            raise StateFileRefused(f"larger than {STATE_BYTES_MAX} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(STATE_BYTES_MAX + 1)
    finally:
        os.close(fd)
