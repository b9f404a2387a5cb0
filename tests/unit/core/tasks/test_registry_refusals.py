"""What the registry refuses (daemon/core/tasks/registry.py): args and env a task does not
allow, too many args, and an unknown task with the tasks defined, bounded."""

from __future__ import annotations

from daemon.core.runqueue import RunRequest
from daemon.core.tasks import (
    MAX_ARGS,
    Task,
    TaskRegistry,
)


def test_refusals_for_args_and_env_not_allowed() -> None:
    strict = Task(name="strict", command=("true",))
    open_task = Task(name="open", command=("true",), allow_args=True, allow_env=frozenset({"A"}))
    registry = TaskRegistry({"strict": strict, "open": open_task})
    assert registry.refusal(RunRequest(task="strict")) is None
    assert registry.refusal(RunRequest(task="strict", args=("x",))) == (
        "task 'strict' does not accept args"
    )
    assert registry.refusal(RunRequest(task="strict", env={"A": "1"})) == (
        "task 'strict' does not allow env 'A'"
    )
    assert registry.refusal(RunRequest(task="open", args=("x",), env={"A": "1"})) is None
    assert registry.refusal(RunRequest(task="open", env={"A": "1", "PATH": "/evil"})) == (
        "task 'open' does not allow env 'PATH'"
    )
    too_many = tuple(str(n) for n in range(MAX_ARGS + 1))
    assert registry.refusal(RunRequest(task="open", args=too_many)) == (
        f"too many args (at most {MAX_ARGS})"
    )
    assert registry.refusal(RunRequest(task="ghost")) == (
        "unknown task 'ghost': this container defines open, strict"
    )
    assert registry.names() == frozenset({"strict", "open"})
    assert registry.get("ghost") is None


def test_an_unknown_task_is_refused_with_the_tasks_defined() -> None:
    assert TaskRegistry({}).refusal(RunRequest(task="x")) == (
        "unknown task 'x': this container defines no tasks"
    )
    many = {f"t{n:02d}": Task(name=f"t{n:02d}", command=("true",)) for n in range(35)}
    refusal = TaskRegistry(many).refusal(RunRequest(task="x"))
    listed = ", ".join(f"t{n:02d}" for n in range(30))
    assert refusal == f"unknown task 'x': this container defines {listed} and 5 more"
    huge = TaskRegistry(many).refusal(RunRequest(task="y" * 5_000_000))
    assert huge is not None
    assert huge.startswith(f"unknown task '{'y' * 128}'... (5000000 characters): this container")
    assert len(huge) < 1000
