"""Handlers that ship with runbroker, for demos, smoke tests and benchmarks.

Use them from a tasks file, for example ``handler = "daemon.core.builtin_tasks:noop"``.
"""

from __future__ import annotations

from typing import Any

from daemon.core.tasks import RunContext


async def noop(run: RunContext) -> None:
    """Does nothing and succeeds: measures the broker's own overhead."""
    del run


async def describe(run: RunContext) -> dict[str, Any]:
    """Returns the run's context (never its env values, which can be secrets)."""
    return {
        "run_id": run.run_id,
        "task": run.task,
        "trigger": run.trigger,
        "args": list(run.args),
        "env_names": sorted(run.env),
        "context": dict(run.context),
    }
