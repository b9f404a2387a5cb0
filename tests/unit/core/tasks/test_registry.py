"""The registry a reload swaps (daemon/core/tasks/registry.py): a removed task refused by name, a
queued run of a removed or changed task given one result by the definition it meets."""

from __future__ import annotations

import asyncio
from typing import Any

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue, RunRequest
from daemon.core.tasks import RunContext, Task, TaskRegistry


def test_a_replaced_registry_refuses_a_removed_task_by_name() -> None:
    registry = TaskRegistry({"a": Task("a", command=("true",)), "b": Task("b", command=("true",))})
    changes = registry.replace({"a": Task("a", command=("true",))})
    assert changes.removed == ("b",)
    assert "b" not in registry
    assert registry.refusal(RunRequest(task="b")) == (
        "task 'b' was removed by a reload (this container defines a)"
    )
    registry.replace({"a": Task("a", command=("true",)), "b": Task("b", command=("true",))})
    assert registry.refusal(RunRequest(task="b")) is None  # added back: runs again
    assert registry.removed == {}


async def ran_with(run: RunContext) -> dict[str, Any]:
    return {"handler": "new"}


async def old_handler(run: RunContext) -> dict[str, Any]:
    return {"handler": "old"}


async def _executed(registry: TaskRegistry, task: str, swap: dict[str, Task]) -> list[Any]:
    """The events of a run of ``task`` queued before the registry's tasks became ``swap``."""
    queue = RunQueue(4)
    executor = Executor(queue, registry, ChildSupervisor(), default_grace_s=1.0)
    events: list[Any] = []
    done = asyncio.Event()

    def listen(_run: Any, event: Any) -> None:
        events.append(event)
        if event.kind == "done":
            done.set()

    queue.submit(RunRequest(task=task), listen)
    registry.replace(swap)
    consumer = asyncio.create_task(executor.run_forever())
    async with asyncio.timeout(10):
        await done.wait()
    queue.close()
    await consumer
    return events


async def test_a_queued_run_of_a_removed_task_gets_exactly_one_failed_result() -> None:
    registry = TaskRegistry({"gone": Task("gone", handler=old_handler)})
    events = await _executed(registry, "gone", {"other": Task("other", handler=ran_with)})
    assert [event.kind for event in events] == ["queued", "done"]  # never started, one result
    done = events[-1].fields
    assert done["ok"] is False
    assert done["reason"].startswith("task 'gone' was removed by a reload")


async def test_a_queued_run_of_a_changed_task_runs_the_new_definition() -> None:
    registry = TaskRegistry({"job": Task("job", handler=old_handler)})
    events = await _executed(registry, "job", {"job": Task("job", handler=ran_with)})
    assert [event.kind for event in events] == ["queued", "started", "done"]
    assert events[-1].fields["output"] == {"handler": "new"}
