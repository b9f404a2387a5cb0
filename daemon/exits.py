"""The exit codes of the ``runbroker`` command: its contract with shells, cron, CI and
``docker exec`` (the README, "Commands").

Every command returns one of these and no module defines its own. No imports, because a cold
``runbroker trigger`` loads this module.
"""

EXIT_OK = 0  # the run succeeded, a clean drain (``run``), healthy (``health``)
EXIT_FAILED = 1  # the run failed or was cancelled, unhealthy (``health``), refused (``reload``)
EXIT_FATAL = EXIT_FAILED  # ``run``: a fatal error, or a forced exit (a second signal)
EXIT_USAGE = 2  # a usage error, or a request the daemon refuses
EXIT_CONFIG = EXIT_USAGE  # ``run`` and ``once``: a bad setting or tasks file, nothing started
EXIT_SKIPPED = (
    3  # not run: ``trigger``, its task is busy and skips; ``once --skip``, a run in flight
)
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: the daemon is unreachable, or refuses this user
EXIT_TEMPFAIL = 75  # EX_TEMPFAIL: rejected (queue full, shutting down), worth a retry
EXIT_GAVE_UP = 124  # ``trigger --timeout``: gave up waiting, the run goes on (as timeout(1))
EXIT_INTERRUPTED = 130  # 128 + SIGINT: interrupted by the user, the run goes on
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: a run's output was closed (``trigger x | head -1``)
