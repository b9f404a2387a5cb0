"""Daemon settings: the one place that reads ``RUNBROKER_*`` from the environment.

Every value is validated at start-up; ``load_settings`` raises ``SettingsError`` carrying one
line that names the variable, so ``runbroker run`` can exit 2 with nothing started. The thin
client does not import this module (pydantic is too slow for a cold ``docker exec``); it reads
only the socket path, see ``client.socket_path_from_env``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from daemon.schedules.interval import parse_duration

ENV_PREFIX = "RUNBROKER_"
DOCKER_SECRET_PATH = Path("/run/secrets/runbroker_database_url")

# Variables that belong to runbroker but are not settings of the daemon itself: the run context
# given to jobs (a job may start `runbroker trigger`) and the client-only ones.
CONTEXT_VARS = frozenset(
    {
        "RUN_ID",
        "TASK",
        "TRIGGER",
        "JOB",
        "SCHEDULED_FOR",
        "ATTEMPT",
        "PAYLOAD",
        "TEST_BACKEND",
        "TEST_DSN",
    }
)


class SettingsError(Exception):
    """A bad setting; ``str(err)`` is one line naming the variable."""


# What the PostgreSQL driver (asyncpg) accepts in a database URL: these query parameters are
# checked against the values it knows; any other parameter is sent to the server as a setting.
_URL_SCHEMES = ("postgresql", "postgres")
_URL_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslnegotiation": ("postgres", "direct"),
    "target_session_attrs": (
        "any",
        "primary",
        "standby",
        "read-write",
        "read-only",
        "prefer-standby",
    ),
    "gsslib": ("gssapi", "sspi"),
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
}
_IPV6_HOST = re.compile(r"\[([^\]]+)\](?::([^:]*))?")


def _port_problem(text: str) -> str | None:
    if not (text.isascii() and text.isdigit() and 0 < int(text) < 65536):
        return "the port is not a number from 1 to 65535"
    return None


def _host_problem(hostspec: str) -> str | None:
    """One entry of the URL's host list (``host``, ``host:port``, ``[v6]:port``, ``/socket``)."""
    if not hostspec:
        return "an empty host in the host list"
    if hostspec.startswith("/"):
        return None  # a unix socket directory
    if hostspec.startswith("["):
        match = _IPV6_HOST.fullmatch(hostspec)
        if match is None:
            return "an IPv6 host must be written [address] or [address]:port"
        try:
            ipaddress.IPv6Address(urllib.parse.unquote(match[1]).split("%")[0])
        except ValueError:
            return "the host in [...] is not an IPv6 address"
        port = match[2]
    else:
        _host, sep, port = hostspec.partition(":")
        if not sep:
            return None
    if port is None or port == "":
        return None
    return _port_problem(urllib.parse.unquote(port))


def database_url_problem(url: str) -> str | None:
    """Why the driver could not use ``url``, or None. Checks the form only (scheme, hosts,
    ports, the query parameters the driver knows), not whether the database is there: a
    database that is down or missing is an outage the daemon waits out. The message never
    repeats the user name or password."""
    if not url.strip():
        return "is empty"
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return "is not a valid URL (for example an unclosed [ in an IPv6 host)"
    if parts.scheme not in _URL_SCHEMES:
        return "expected a URL such as postgresql://USER:PASSWORD@HOST:5432/DATABASE" + (
            f" (the scheme must be postgresql or postgres, not {parts.scheme[:20]!r})"
            if parts.scheme
            else ""
        )
    hostlist = parts.netloc.partition("@")[2] if "@" in parts.netloc else parts.netloc
    if hostlist:
        for hostspec in hostlist.split(","):
            if (problem := _host_problem(hostspec)) is not None:
                return problem
    if parts.query:
        try:
            query = urllib.parse.parse_qs(parts.query, strict_parsing=True)
        except ValueError:
            return "its query string is not a list of name=value parameters"
        for name, values in query.items():
            value = values[-1]
            if name == "port":
                for port in value.split(","):
                    if (problem := _port_problem(port)) is not None:
                        return problem
            choices = _URL_CHOICES.get(name)
            if choices is not None and value not in choices:
                return f"{name} must be one of {', '.join(choices)}"
    return None


def _duration(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 90s, 1h30m or 250ms")
    return parse_duration(value.strip())


Duration = Annotated[float, BeforeValidator(_duration)]


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
    socket: Path = Path("/run/runbroker/runbroker.sock")
    lock_dir: Path | None = None
    queue_capacity: int = Field(16, ge=0, le=1_000_000)
    grace_s: Duration = Field(5.0, alias="RUNBROKER_GRACE", ge=0)
    request_timeout_s: Duration = Field(30.0, alias="RUNBROKER_REQUEST_TIMEOUT", gt=0)
    shutdown_timeout_s: Duration = Field(25.0, alias="RUNBROKER_SHUTDOWN_TIMEOUT", gt=0)
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

    @field_validator("log_format", "log_level", mode="before")
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
        if not value.is_absolute():
            raise ValueError("must be an absolute path")
        if len(os.fsencode(value)) > 107:
            raise ValueError("is longer than the 107 bytes a unix socket path may have")
        return value

    @field_validator("metrics_addr")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        host, sep, port = value.rpartition(":")
        if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError("expected host:port, for example 0.0.0.0:9464 or [::]:9464")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]  # an IPv6 literal
        try:
            ipaddress.ip_address(host or "0.0.0.0")
        except ValueError:
            if not host.replace("-", "").replace(".", "").isalnum():
                raise ValueError(f"{host!r} is neither an IP address nor a host name") from None
        if ":" in host:
            return f"[{host}]:{int(port)}"
        return f"{host or '0.0.0.0'}:{int(port)}"

    @property
    def lock_directory(self) -> Path:
        return self.lock_dir if self.lock_dir is not None else self.socket.parent

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
    """Validate the environment; raise ``SettingsError`` with one line naming the variable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = str(first["loc"][0]) if first["loc"] else "?"
        variable = _ALIASED.get(field_name, field_name)
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"{variable}: {message}") from None
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
