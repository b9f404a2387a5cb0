"""A notification's URL, which may carry a token: read from the tasks file, a file or an
environment variable, and never shown.

A ``Secret`` (``daemon.core.tasks.notify_targets``) keeps its value out of every ``repr`` and
``str`` (so out of a log line, a ``status`` answer or an error message): only where it came
from (``source``) is said. A value read from a file or the environment is read when the tasks
file is loaded, so a missing file or variable is a refused start or reload, not a failure at
the first notification.

The values of ``url_file`` and ``url_env`` are names, said in errors and in ``url_from``; one
that looks like a URL (a URL put in the wrong key) is refused without being shown, and so is
a ``url_env`` that is not a variable's name (it may be a token pasted there).

The environment is read here, beside ``daemon/settings.py``: the variable's name is the tasks
file's own (not a ``RUNBROKER_`` setting) and is read again at each reload.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from daemon.core.tasks.notify_targets import Secret
from daemon.taskfile.tasks_file import TaskConfigError

SECRET_FILE_MAX_BYTES = 4096  # a URL with a token is far shorter
SECRET_KEYS = ("url", "url_file", "url_env")
_URL_LIKE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*:/"  # a scheme anywhere: x://..., or x:/... half typed
    r"|^\s*(?:https?\b|www\.)"  # http, https or www. first (not HTTP_HOOK_URL, not httpd)
    r"|^\s*[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?::[0-9]+)?/",  # a host first: hc-ping.com/...
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def read_secret(where: str, table: Mapping[str, Any]) -> Secret:
    """The URL of ``table``: exactly one of ``url``, ``url_file`` or ``url_env``; an http(s)
    URL, else a ``TaskConfigError`` that names the key and never the value."""
    given = [key for key in SECRET_KEYS if key in table]
    if len(given) != 1:
        raise TaskConfigError(f"{where}: set exactly one of 'url', 'url_file' or 'url_env'")
    key = given[0]
    name = table[key]
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{where}: {key} must be a non-empty string")
    if key == "url":
        value, source = name, "tasks file"
    else:
        _refuse_unshowable(where, key, name)
        if key == "url_file":
            value, source = _file_text(where, name), f"file {name}"
        else:
            found = os.environ.get(name)
            if not found:
                raise TaskConfigError(f"{where}: url_env: environment variable {name} is not set")
            value, source = found.strip(), f"env {name}"
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise TaskConfigError(f"{where}: {key}: the URL (from {source}) must be http(s)://...")
    return Secret(value, source)


def looks_like_url(value: str) -> bool:
    """``value`` may be a URL (whole, or without its scheme), so it may carry a token."""
    return _URL_LIKE.search(value) is not None


def _refuse_unshowable(where: str, key: str, name: str) -> None:
    """The value of ``url_file`` or ``url_env`` is said in errors and in ``url_from``: a value
    that may be a secret is refused here, naming the key and never the value."""
    holder = "the file" if key == "url_file" else "the environment variable"
    if looks_like_url(name):
        raise TaskConfigError(
            f"{where}: {key}: the value looks like a URL (not shown): a URL goes in 'url';"
            f" {key} names {holder} that holds it"
        )
    if key == "url_env" and _ENV_NAME.fullmatch(name) is None:
        raise TaskConfigError(
            f"{where}: url_env: must be an environment variable's name (letters, digits and"
            " '_', not starting with a digit; the value is not shown)"
        )


def _file_text(where: str, path: str) -> str:
    """The stripped text of the secret file ``path``: a regular file (opened without blocking,
    so a FIFO put there cannot hang PID 1) of at most ``SECRET_FILE_MAX_BYTES``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise TaskConfigError(f"{where}: url_file: cannot read {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskConfigError(f"{where}: url_file: {path} is not a regular file")
        data = os.read(fd, SECRET_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise TaskConfigError(f"{where}: url_file: cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > SECRET_FILE_MAX_BYTES:
        raise TaskConfigError(f"{where}: url_file: {path} is over {SECRET_FILE_MAX_BYTES} bytes")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TaskConfigError(f"{where}: url_file: {path} is not UTF-8 text") from None
