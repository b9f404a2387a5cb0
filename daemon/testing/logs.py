"""What ``daemon.testing`` prints to a test's console: the daemon's own log lines (a
handler's ``run.crashed``) with plain tracebacks and no local variables.

Unconfigured, structlog renders a traceback with ``rich`` when it is installed, every frame's
locals included: a handler's payload, an env value, a secret in a user's CI log. When the
user's tests have not configured structlog themselves, the first run a test starts sets
structlog's own defaults with a plain traceback instead; a configuration of theirs is left
as it is.
"""

from __future__ import annotations

import structlog


def plain_tracebacks() -> None:
    """structlog's default chain with plain tracebacks, unless structlog is configured."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
        ]
    )
