"""Daemon settings: the one place that reads ``RUNBROKER_*`` from the environment.

Every value is checked at start-up, so that ``runbroker run`` exits 2 with one line naming the
variable and nothing started. The thin client does not import it, because pydantic is too slow
for a cold ``docker exec``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from daemon.core.context_vars import CONTEXT_NAMES, ENV_PREFIX
from daemon.setting_values import (
    ByteSize,
    Duration,
    checked_socket_path,
    database_url_problem,
    normalized_host_port,
)
from daemon.wire.protocol import DEFAULT_SOCKET

# A run's journal must keep its longest line whole: the widest line counts just over 512 KiB
# (``sizes``), and a trim keeps seven eighths of the bound, so 640 KiB is the least round bound.
OUTPUT_RUN_BYTES_MIN = 640 * 1024

DOCKER_SECRET_PATH = Path("/run/secrets/runbroker_database_url")

# Variables that belong to runbroker but are not settings of the daemon itself: the run context
# given to jobs (a job may start `runbroker trigger`) and the test suite's own.
CONTEXT_VARS = CONTEXT_NAMES | {"TEST_BACKEND", "TEST_DSN"}


class SettingsError(Exception):
    """A bad setting: ``str(err)`` is one line naming the variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        case_sensitive=False,
        extra="ignore",
        hide_input_in_errors=True,
        validate_default=True,
    )

    interval: str = ""
    default_interval_s: Duration = Field(3600.0, alias="RUNBROKER_DEFAULT_INTERVAL", gt=0)
    jitter: float = Field(0.1, ge=0.0, le=1.0)
    fire_on_start: bool = True
    command: str = ""
    tasks_file: Path = Path("/etc/runbroker/tasks.toml")
    socket: Path = Path(DEFAULT_SOCKET)  # the client's default too: it cannot load this module
    lock_dir: Path | None = None
    state_dir: Path | None = None  # each task's last planned slot, for catch-up after a restart
    queue_capacity: int = Field(16, ge=0, le=1_000_000)
    grace_s: Duration = Field(5.0, alias="RUNBROKER_GRACE", ge=0)
    request_timeout_s: Duration = Field(30.0, alias="RUNBROKER_REQUEST_TIMEOUT", gt=0)
    max_connections: int = Field(1024, ge=1, le=1_000_000)
    shutdown_timeout_s: Duration = Field(8.0, alias="RUNBROKER_SHUTDOWN_TIMEOUT", gt=0)
    database_url: SecretStr | None = None
    database_url_file: Path | None = None
    poll_interval_s: Duration = Field(60.0, alias="RUNBROKER_POLL_INTERVAL", gt=0)
    batch_size: int = Field(20, ge=1, le=10_000)
    retry_attempts: int = Field(3, ge=1, le=1000)
    retry_backoff_s: Duration = Field(60.0, alias="RUNBROKER_RETRY_BACKOFF", ge=0)
    lease_s: Duration = Field(60.0, alias="RUNBROKER_LEASE", gt=0)
    dependency_wait_s: Duration = Field(60.0, alias="RUNBROKER_DEPENDENCY_WAIT", gt=0)
    run_retention_s: Duration = Field(30 * 86400.0, alias="RUNBROKER_RUN_RETENTION", gt=0)
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics_addr: str | None = None
    # The output journal of `runbroker logs` (daemon.core.journal).
    output_run_bytes: ByteSize = Field(1024 * 1024, ge=0, le=1024**3)  # >= OUTPUT_RUN_BYTES_MIN
    output_history_runs: int = Field(32, ge=0, le=10_000)
    output_history_bytes: ByteSize = Field(16 * 1024 * 1024, ge=0, le=16 * 1024**3)
    # A job's lines in the daemon's own log, and how long a reader may hold a job's output back.
    output_log: Literal["json", "raw", "off"] = "json"
    output_hold_s: Duration = Field(5.0, alias="RUNBROKER_OUTPUT_HOLD", ge=0, le=3600)

    @field_validator("log_format", "log_level", "output_log", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: SecretStr | None) -> SecretStr | None:
        text = value.get_secret_value() if value is not None else ""
        if text and (problem := database_url_problem(text)):  # set but empty: no database
            raise ValueError(problem)
        return value

    @field_validator("socket")
    @classmethod
    def _socket_path(cls, value: Path) -> Path:
        return checked_socket_path(value)

    @field_validator("tasks_file", "lock_dir", "state_dir", "database_url_file")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        """Relative to the directory the daemon starts in: it then works in ``/``."""
        return None if value is None else Path(os.path.abspath(value))

    @field_validator("metrics_addr")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        return normalized_host_port(value)

    @property
    def lock_directory(self) -> Path:
        return self.lock_dir if self.lock_dir is not None else self.socket.parent

    @property
    def tasks_file_required(self) -> bool:
        """Whether the tasks file must exist: one that ``RUNBROKER_TASKS_FILE`` names must, the
        default may be absent."""
        return "tasks_file" in self.model_fields_set

    def default_command(self) -> tuple[str, ...]:
        """``RUNBROKER_COMMAND`` split as a shell would (the task ``default``).

        ``ValueError`` for an unclosed quote or a trailing escape."""
        return tuple(shlex.split(self.command)) if self.command else ()

    def database_dsn(self) -> str | None:
        return self.database_url.get_secret_value() if self.database_url else None


_ALIASED = {
    name: (field.alias or (ENV_PREFIX + name.upper()))
    for name, field in Settings.model_fields.items()
}
KNOWN_VARS = frozenset(_ALIASED.values())


def unknown_variables(environ: dict[str, str] | None = None) -> list[str]:
    """``RUNBROKER_*`` variables that no setting reads: warned about, since a typo is silent."""
    env = os.environ if environ is None else environ
    return sorted(
        name
        for name in env
        if name.startswith(ENV_PREFIX)
        and name not in KNOWN_VARS
        and name.removeprefix(ENV_PREFIX) not in CONTEXT_VARS
    )


def nearest_setting(name: str) -> str | None:
    """The real variable an unknown ``RUNBROKER_*`` name most likely meant (a typo such as
    ``RUNBROKER_INTERVALL``), or None when none is close."""
    import difflib  # only when a variable is unknown

    by_suffix = {known.removeprefix(ENV_PREFIX): known for known in KNOWN_VARS}
    close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), by_suffix, n=1, cutoff=0.75)
    return by_suffix[close[0]] if close else None


def _read_url_file(path: Path, variable: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SettingsError(f"{variable}: cannot read {path}: {exc.strerror}") from None
    if not text:
        raise SettingsError(f"{variable}: {path} is empty")
    if (problem := database_url_problem(text)) is not None:
        raise SettingsError(f"{variable}: the URL in {path} {problem}")
    return text


def load_settings() -> Settings:
    """Validate the environment, or raise ``SettingsError`` with one line naming the variable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = str(first["loc"][0]) if first["loc"] else "?"
        message = str(first["msg"]).removeprefix("Value error, ")
        variable = _ALIASED.get(field_name, field_name)
        raise SettingsError(f"{variable}: {message}") from None
    if settings.output_run_bytes < OUTPUT_RUN_BYTES_MIN:
        raise SettingsError(
            f"RUNBROKER_OUTPUT_RUN_BYTES: must be at least 640KiB ({OUTPUT_RUN_BYTES_MIN}), so that"
            " a run's longest line (64 KiB) is kept whole, whatever its characters"
        )
    if settings.output_history_runs and settings.output_run_bytes > settings.output_history_bytes:
        raise SettingsError(
            "RUNBROKER_OUTPUT_RUN_BYTES: must not exceed RUNBROKER_OUTPUT_HISTORY_BYTES "
            "(a finished run must fit the history)"
        )
    if settings.database_url is None:
        if settings.database_url_file is not None:
            url = _read_url_file(settings.database_url_file, "RUNBROKER_DATABASE_URL_FILE")
            settings.database_url = SecretStr(url)
        elif DOCKER_SECRET_PATH.is_file():
            url = _read_url_file(DOCKER_SECRET_PATH, str(DOCKER_SECRET_PATH))
            settings.database_url = SecretStr(url)
    elif settings.database_url_file is not None:
        raise SettingsError(
            "RUNBROKER_DATABASE_URL_FILE: set either it or RUNBROKER_DATABASE_URL, not both"
        )
    return settings
