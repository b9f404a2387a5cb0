"""The names of a run's context as a job is given it: the one home of ``RUNBROKER_RUN_ID`` and
the rest (README, "Tasks").

The core holds them because it gives them to jobs. Nothing here imports anything.
"""

ENV_PREFIX = "RUNBROKER_"  # runbroker's own variables: its settings and a run's context

RUN_ID = "RUN_ID"
TASK = "TASK"
TRIGGER = "TRIGGER"
PAYLOAD = "PAYLOAD"  # the payload as compact JSON, when the run has one
# A database job's run only:
JOB = "JOB"
SCHEDULED_FOR = "SCHEDULED_FOR"  # the occurrence, RFC 3339 in UTC
ATTEMPT = "ATTEMPT"  # 1 for the first

CONTEXT_NAMES = frozenset({RUN_ID, TASK, TRIGGER, PAYLOAD, JOB, SCHEDULED_FOR, ATTEMPT})


def env_name(name: str) -> str:
    """A context name as a command's environment has it: ``RUNBROKER_RUN_ID``."""
    return ENV_PREFIX + name
