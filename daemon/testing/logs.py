"""What ``daemon.testing`` prints to a test's console: the daemon's log lines with plain
tracebacks and no local variables.

Unconfigured structlog renders every frame's locals with ``rich``, which would put a payload or
a secret into a user's CI log. A configuration of the user's own is left as it is.
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
