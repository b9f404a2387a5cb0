"""structlog set-up: JSON lines when stdout is not a TTY, a readable console on a TTY.

The stdlib ``logging`` root goes through the same chain, so every line has one shape.
Tracebacks never carry local variables, because those can hold DSNs and payloads.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog
from structlog.typing import FilteringBoundLogger, Processor

LogFormat = Literal["auto", "json", "console"]

# Where ``configure_logging`` sends lines, and whether for people: the job output log
# (``output_log``) writes its JSON lines there itself.
_configured: tuple[TextIO, bool] | None = None


def _renderer(use_console: bool) -> Processor:
    if use_console:
        return structlog.dev.ConsoleRenderer(
            exception_formatter=structlog.dev.plain_traceback, colors=False
        )
    return structlog.processors.JSONRenderer()


def configure_logging(
    log_format: LogFormat = "auto", level: str = "info", stream: TextIO | None = None
) -> None:
    """Install one processor chain for structlog and stdlib logging. Safe to call again.

    Lines go to ``stream``, stdout by default, since ``runbroker once`` keeps stdout for the job."""
    global _configured
    out = sys.stdout if stream is None else stream
    level_no = logging.getLevelNamesMapping()[level.upper()]
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        timestamper,
    ]
    is_console = log_format == "console" or (log_format == "auto" and out.isatty())
    _configured = (out, is_console)
    exception_processors: list[Processor] = (
        []
        if is_console
        else [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        ]
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        # Levels below LOG_LEVEL are no-op methods: a dropped line costs a call, not a trip
        # through the processors to be thrown away by stdlib logging at the end.
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        # Stdlib records (asyncio, asyncpg) keep their ``extra`` fields as keys.
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *exception_processors,
            _renderer(is_console),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_no)
    logging.captureWarnings(True)


def keep_out_of_log(*names: str) -> None:
    """Keep the named stdlib loggers (a library's) out of the log at every level: for a library
    that logs what must not be written, since the root's chain would write it."""
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def json_log_stream() -> TextIO | None:
    """Where the log's JSON lines go under ``configure_logging``'s JSON set-up.

    None in the console format, or when events are captured (tests)."""
    if _configured is None or _configured[1]:
        return None
    if not isinstance(structlog.get_config()["logger_factory"], structlog.stdlib.LoggerFactory):
        return None
    return _configured[0]


def get_logger(name: str) -> FilteringBoundLogger:
    logger: FilteringBoundLogger = structlog.get_logger(name)
    return logger


def log_enabled(level: int, name: str = "runbroker") -> bool:
    """Whether a line at ``level`` would be written, to skip building lines that would be dropped.

    False only when structlog goes through stdlib logging and the level is dropped. Any other
    set-up (tests capturing events) keeps every line."""
    if not isinstance(structlog.get_config()["logger_factory"], structlog.stdlib.LoggerFactory):
        return True
    return logging.getLogger(name).isEnabledFor(level)
