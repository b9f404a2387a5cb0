"""The environment a command task runs with: the container's, minus runbroker's own settings,
plus the run's context and the env the trigger was allowed to set.

The core's one reader of ``os.environ``: it passes the container's environment on to the
commands the daemon starts (its jobs, the notifications' command), and reads no setting of its
own from it (those are ``daemon/settings.py``'s)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from daemon.core.context_vars import ENV_PREFIX, PAYLOAD, RUN_ID, TASK, TRIGGER, env_name
from daemon.core.runqueue import Run, job_context

# Settings of the daemon itself are not the job's business (the database URL is a secret)...
# except where a job that runs `runbroker trigger` or `once` itself must find the daemon.
_SHARED_ENV = frozenset({f"{ENV_PREFIX}SOCKET", f"{ENV_PREFIX}LOCK_DIR"})


def shared_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The container's environment minus runbroker's own settings."""
    return {
        key: value
        for key, value in base.items()
        if key in _SHARED_ENV or not key.startswith(ENV_PREFIX)
    }


def container_environment() -> dict[str, str]:
    """The daemon's own environment as its commands inherit it: runbroker's settings left out."""
    return shared_environment(os.environ)


def job_environment(base: Mapping[str, str], run: Run) -> dict[str, str]:
    """The environment a command task runs with: the container's, minus runbroker's own
    settings, plus the run context and the env the trigger was allowed to set."""
    return with_run(shared_environment(base), run)


def with_run(shared: Mapping[str, str], run: Run) -> dict[str, str]:
    """``shared`` (the container's environment, made once) with the run's own variables: the
    run context wins over what the trigger set."""
    request = run.request
    env = dict(shared)
    env.update(request.env)
    env[env_name(RUN_ID)] = run.id
    env[env_name(TASK)] = request.task
    env[env_name(TRIGGER)] = request.trigger
    if request.job is not None:  # a database job's run: RUNBROKER_JOB, _SCHEDULED_FOR, _ATTEMPT
        for key, value in job_context(request).items():
            env[env_name(key)] = value
    if request.payload is not None:
        env[env_name(PAYLOAD)] = json.dumps(request.payload, separators=(",", ":"))
    return env
