"""The log's set-up (daemon/log/logs.py): a library's loggers kept out of it."""

from __future__ import annotations

import io
import logging

import structlog

from daemon.log.logs import configure_logging, keep_out_of_log


def test_a_library_logger_kept_out_writes_nothing_at_any_level() -> None:
    out = io.StringIO()
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    library = logging.getLogger("a-library-of-the-test")
    try:
        configure_logging("json", "debug", stream=out)
        keep_out_of_log("a-library-of-the-test")
        library.critical("https://example.invalid/?token=secret")
        logging.getLogger("another-library").info("kept")
    finally:
        library.setLevel(logging.NOTSET)
        root.handlers[:], root.level = handlers, level
        structlog.configure(**saved)
    assert "secret" not in out.getvalue()
    assert '"event": "kept"' in out.getvalue()
