"""Settings from ``RUNBROKER_*``: values, Go durations, one-line errors that name the variable
and never show a secret, unknown variables, the database URL from a file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon import settings as settings_module
from daemon.core.context_vars import CONTEXT_NAMES, ENV_PREFIX, env_name
from daemon.core.jobenv import job_environment
from daemon.core.runqueue import Run, RunRequest
from daemon.settings import SettingsError, load_settings, unknown_variables

DSN = "postgres://app:hunter2@db.internal/app"


pytestmark = pytest.mark.usefixtures("clean_env")


def _error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as excinfo:
        load_settings()
    error = excinfo.value
    # No ValidationError (which could carry the input) is chained behind it in a traceback.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return str(error)


# Each setting's value when nothing is set: (field, value).
DEFAULTS = [
    ("interval", ""),
    ("default_interval_s", 3600.0),
    ("jitter", 0.1),
    ("fire_on_start", True),
    ("socket", Path("/run/runbroker/runbroker.sock")),
    ("tasks_file", Path("/etc/runbroker/tasks.toml")),
    ("queue_capacity", 16),
    ("grace_s", 5.0),
    ("shutdown_timeout_s", 8.0),
    ("poll_interval_s", 60.0),
    ("batch_size", 20),
    ("retry_attempts", 3),
    ("retry_backoff_s", 60.0),
    ("lease_s", 60.0),
    ("log_format", "auto"),
    ("log_level", "info"),
    ("metrics_addr", None),
    ("lock_directory", Path("/run/runbroker")),
]

# Each variable's text and the value it gives its field: (variable, text, field, value).
FROM_THE_ENVIRONMENT = [
    ("RUNBROKER_INTERVAL", "5m", "interval", "5m"),
    ("RUNBROKER_JITTER", "0.25", "jitter", 0.25),
    ("RUNBROKER_FIRE_ON_START", "false", "fire_on_start", False),
    ("RUNBROKER_COMMAND", "backup --all", "command", "backup --all"),
    ("RUNBROKER_TASKS_FILE", "/srv/tasks.toml", "tasks_file", Path("/srv/tasks.toml")),
    ("RUNBROKER_SOCKET", "/tmp/rb/rb.sock", "socket", Path("/tmp/rb/rb.sock")),
    ("RUNBROKER_QUEUE_CAPACITY", "3", "queue_capacity", 3),
    ("RUNBROKER_GRACE", "1m30s", "grace_s", 90.0),
    ("RUNBROKER_SHUTDOWN_TIMEOUT", "9s", "shutdown_timeout_s", 9.0),
    ("RUNBROKER_REQUEST_TIMEOUT", "2s", "request_timeout_s", 2.0),
    ("RUNBROKER_POLL_INTERVAL", "15s", "poll_interval_s", 15.0),
    ("RUNBROKER_BATCH_SIZE", "7", "batch_size", 7),
    ("RUNBROKER_RETRY_ATTEMPTS", "5", "retry_attempts", 5),
    ("RUNBROKER_RETRY_BACKOFF", "250ms", "retry_backoff_s", 0.25),
    ("RUNBROKER_LEASE", "2m", "lease_s", 120.0),
    ("RUNBROKER_LOG_FORMAT", "JSON", "log_format", "json"),
    ("RUNBROKER_LOG_LEVEL", " Debug ", "log_level", "debug"),
    ("RUNBROKER_METRICS_ADDR", ":9464", "metrics_addr", "0.0.0.0:9464"),
]


def test_defaults() -> None:
    settings = load_settings()
    assert {field: getattr(settings, field) for field, _value in DEFAULTS} == dict(DEFAULTS)
    assert settings.database_dsn() is None
    assert "tasks_file" not in settings.model_fields_set


def test_values_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, text, _field, _value in FROM_THE_ENVIRONMENT:
        monkeypatch.setenv(variable, text)
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", DSN)
    settings = load_settings()
    read = {
        field: getattr(settings, field) for _variable, _text, field, _value in FROM_THE_ENVIRONMENT
    }
    assert read == {field: value for _variable, _text, field, value in FROM_THE_ENVIRONMENT}
    assert "tasks_file" in settings.model_fields_set
    assert settings.lock_directory == Path("/tmp/rb")
    assert settings.database_dsn() == DSN
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1.5h", 5400.0), (" 2m ", 120.0)],
)
def test_go_durations(monkeypatch: pytest.MonkeyPatch, text: str, seconds: float) -> None:
    monkeypatch.setenv("RUNBROKER_GRACE", text)
    assert load_settings().grace_s == seconds


def test_lock_dir_overrides_the_socket_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNBROKER_SOCKET", "/tmp/rb/rb.sock")
    monkeypatch.setenv("RUNBROKER_LOCK_DIR", "/var/lock/rb")
    assert load_settings().lock_directory == Path("/var/lock/rb")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RUNBROKER_GRACE", "soon"),
        ("RUNBROKER_GRACE", "90"),
        ("RUNBROKER_GRACE", "-1s"),
        ("RUNBROKER_SHUTDOWN_TIMEOUT", "0s"),
        ("RUNBROKER_DEFAULT_INTERVAL", "0"),
        ("RUNBROKER_LEASE", "1 fortnight"),
        ("RUNBROKER_QUEUE_CAPACITY", "-1"),
        ("RUNBROKER_QUEUE_CAPACITY", "many"),
        ("RUNBROKER_BATCH_SIZE", "0"),
        ("RUNBROKER_JITTER", "1.5"),
        ("RUNBROKER_FIRE_ON_START", "perhaps"),
        ("RUNBROKER_SOCKET", "relative/rb.sock"),
        ("RUNBROKER_SOCKET", "/" + "s" * 120),
        ("RUNBROKER_LOG_FORMAT", "xml"),
        ("RUNBROKER_LOG_LEVEL", "loud"),
        ("RUNBROKER_METRICS_ADDR", "localhost"),
        ("RUNBROKER_METRICS_ADDR", "host:99999"),
        ("RUNBROKER_METRICS_ADDR", "bad host!:9464"),
        ("RUNBROKER_OUTPUT_RUN_BYTES", "lots"),
        ("RUNBROKER_OUTPUT_RUN_BYTES", "1MB"),  # binary units only: 1MiB
        ("RUNBROKER_OUTPUT_RUN_BYTES", "100"),  # below 640 KiB: the longest line must fit
        ("RUNBROKER_OUTPUT_RUN_BYTES", "256KiB"),
        ("RUNBROKER_OUTPUT_RUN_BYTES", "-1"),
        ("RUNBROKER_OUTPUT_RUN_BYTES", "20MiB"),  # more than the history holds
        ("RUNBROKER_OUTPUT_HISTORY_RUNS", "-1"),
        ("RUNBROKER_OUTPUT_HISTORY_BYTES", "2GiBs"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    message = _error(monkeypatch, **{name: value})
    assert message.startswith(f"{name}: ")
    assert len(message) > len(name) + 2
    assert "\n" not in message


@pytest.mark.parametrize(
    ("env", "bounds"),
    [
        ({}, (1024 * 1024, 32, 16 * 1024 * 1024)),
        (
            {
                "RUNBROKER_OUTPUT_RUN_BYTES": "640KiB",
                "RUNBROKER_OUTPUT_HISTORY_RUNS": "5",
                "RUNBROKER_OUTPUT_HISTORY_BYTES": "8 MiB",
            },
            (640 * 1024, 5, 8 * 1024 * 1024),
        ),
        ({"RUNBROKER_OUTPUT_RUN_BYTES": "655360"}, (655360, 32, 16 * 1024 * 1024)),
        # No history: a run's bytes need not fit it.
        (
            {"RUNBROKER_OUTPUT_HISTORY_RUNS": "0", "RUNBROKER_OUTPUT_RUN_BYTES": "1GiB"},
            (1024**3, 0, 16 * 1024 * 1024),
        ),
    ],
)
def test_the_output_journal_bounds(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], bounds: tuple[int, int, int]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (
        settings.output_run_bytes,
        settings.output_history_runs,
        settings.output_history_bytes,
    ) == bounds


def test_secrets_never_appear_in_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", DSN)
    for name in ("RUNBROKER_QUEUE_CAPACITY", "RUNBROKER_LOG_LEVEL", "RUNBROKER_JITTER"):
        message = _error(monkeypatch, **{name: "hunter2"})
        assert message.startswith(name)
        assert "hunter2" not in message
        monkeypatch.delenv(name)
    url_file = tmp_path / "dsn"
    url_file.write_text(DSN)
    message = _error(monkeypatch, RUNBROKER_DATABASE_URL_FILE=str(url_file))
    assert message.startswith("RUNBROKER_DATABASE_URL_FILE: ")
    assert "not both" in message
    assert "hunter2" not in message


def test_database_url_from_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url_file = tmp_path / "dsn"
    url_file.write_text(f"  {DSN}\n")
    monkeypatch.setenv("RUNBROKER_DATABASE_URL_FILE", str(url_file))
    assert load_settings().database_dsn() == DSN


@pytest.mark.parametrize(("content", "fragment"), [("", "is empty"), (None, "cannot read")])
def test_a_bad_database_url_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None, fragment: str
) -> None:
    url_file = tmp_path / "dsn"
    if content is not None:
        url_file.write_text(content)
    message = _error(monkeypatch, RUNBROKER_DATABASE_URL_FILE=str(url_file))
    assert message.startswith("RUNBROKER_DATABASE_URL_FILE: ")
    assert fragment in message


def test_the_docker_secret_is_a_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "runbroker_database_url"
    secret.write_text(DSN + "\n")
    monkeypatch.setattr(settings_module, "DOCKER_SECRET_PATH", secret)
    assert load_settings().database_dsn() == DSN
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", "postgres://other/db")
    assert load_settings().database_dsn() == "postgres://other/db"


def test_unknown_variables_are_reported() -> None:
    environ = {
        "RUNBROKER_INTERVALL": "5m",  # a typo
        "RUNBROKER_GRACE_PERIOD": "5s",
        "RUNBROKER_INTERVAL": "5m",
        "RUNBROKER_GRACE": "5s",
        "RUNBROKER_DATABASE_URL_FILE": "/run/secrets/dsn",
        "RUNBROKER_LOCK_DIR": "/var/lock",
        "RUNBROKER_REQUEST_TIMEOUT": "1s",
        "RUNBROKER_RUN_ID": "r1",
        "RUNBROKER_TASK": "default",
        "RUNBROKER_TRIGGER": "tick",
        "RUNBROKER_JOB": "nightly",
        "RUNBROKER_SCHEDULED_FOR": "2026-01-01T00:00:00Z",
        "RUNBROKER_ATTEMPT": "1",
        "RUNBROKER_PAYLOAD": "{}",
        "PATH": "/usr/bin",
        "OTHER_RUNBROKER_X": "1",
    }
    assert unknown_variables(environ) == ["RUNBROKER_GRACE_PERIOD", "RUNBROKER_INTERVALL"]


def test_every_context_variable_a_job_is_given_is_one_the_settings_know() -> None:
    """The run context's names have one home (``context_vars``): what a job is given is
    exactly those, and none of them is warned about as an unknown setting."""
    request = RunRequest(
        task="t",
        trigger="schedule",
        payload={"k": 1},
        job="nightly",
        attempt=1,
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
    )
    env = job_environment({"RUNBROKER_GRACE": "5s"}, Run(request, run_id="r1"))
    given = {name for name in env if name.startswith(ENV_PREFIX)}
    assert given == {env_name(name) for name in CONTEXT_NAMES}
    assert unknown_variables(env) == []


def test_unknown_variables_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNBROKER_QUEUE_CAPACTY", "4")
    monkeypatch.setenv("RUNBROKER_RUN_ID", "r1")
    assert unknown_variables() == ["RUNBROKER_QUEUE_CAPACTY"]
    assert load_settings().queue_capacity == 16  # the typo is not silently applied


@pytest.mark.parametrize(
    ("value", "normalised"),
    [("[::1]:9464", "[::1]:9464"), ("[::]:0", "[::]:0"), ("metrics.local:1", "metrics.local:1")],
)
def test_metrics_addresses_ipv6_and_names(
    monkeypatch: pytest.MonkeyPatch, value: str, normalised: str
) -> None:
    monkeypatch.setenv("RUNBROKER_METRICS_ADDR", value)
    assert load_settings().metrics_addr == normalised


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("not a url", "postgresql://"),
        ("postgresql://app:hunter2@127.0.0.1:notaport/db", "port"),
        ("postgresql://app:hunter2@[::1/x", "not a valid URL"),
        ("mysql://app:hunter2@db/app", "'mysql'"),
        ("postgresql://app:hunter2@db/app?sslmode=bogus", "sslmode must be one of"),
        ("postgresql://app:hunter2@db:0/app", "port"),
        ("postgresql://app:hunter2@[db]:5432/app", "IPv6"),
        ("postgresql://app:hunter2@db/app?target_session_attrs=any-old", "target_session_attrs"),
        ("postgresql://app:hunter2@db/app?garbage", "query string"),
        ("postgresql://app:hunt/er2@db/app", "port"),  # an unescaped / cuts the password
        ("postgresql://app:hunter2@db/app?foo=bar", "parameter 'foo' is unknown"),
        ("postgresql://app:hunter2@db/app?sslmode=require&Sslmode=x", "'Sslmode' is unknown"),
        ("postgresql://app:hunter2@db/app?search_path=app", "options=-c NAME=VALUE"),
        ("postgresql://app:hunter2@db/app?connect_timeout=10", "'connect_timeout' is libpq's"),
    ],
)
def test_a_malformed_database_url_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, url: str, says: str
) -> None:
    message = _error(monkeypatch, RUNBROKER_DATABASE_URL=url)
    assert message.startswith("RUNBROKER_DATABASE_URL: ")
    assert says in message
    assert "hunter2" not in message
    assert "hunt" not in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:hunter2@db.internal/app",
        "postgres://db1:5432,db2:5433/app?target_session_attrs=read-write",
        "postgresql://app@[::1]:5432/app?sslmode=verify-full&application_name=x",
        "postgresql:///app?host=/var/run/postgresql&port=5433",
        "postgresql://app:p%40ss@db:/app",
        "postgresql://db/app?options=-c%20search_path%3Dapp&sslrootcert=/ca.pem&passfile=/p",
    ],
)
def test_well_formed_database_urls_are_accepted(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", url)
    assert load_settings().database_dsn() == url


def test_a_malformed_database_url_in_a_file_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url_file = tmp_path / "dsn"
    url_file.write_text("mysql://app:hunter2@db/app\n")
    message = _error(monkeypatch, RUNBROKER_DATABASE_URL_FILE=str(url_file))
    assert message.startswith("RUNBROKER_DATABASE_URL_FILE: ")
    assert "hunter2" not in message


def test_an_empty_database_url_still_means_no_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", "")
    assert load_settings().database_dsn() is None
    message = _error(monkeypatch, RUNBROKER_DATABASE_URL="   ")
    assert message == "RUNBROKER_DATABASE_URL: is empty"


def test_the_smallest_run_bound_keeps_the_longest_line_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from daemon.core.journal import RunLog
    from daemon.core.process.lines import LINE_LIMIT_BYTES
    from daemon.core.runqueue import Run, RunRequest
    from daemon.settings import OUTPUT_RUN_BYTES_MIN

    message = _error(monkeypatch, RUNBROKER_OUTPUT_RUN_BYTES=str(OUTPUT_RUN_BYTES_MIN - 1))
    assert message.startswith("RUNBROKER_OUTPUT_RUN_BYTES: must be at least 640KiB (655360)")
    log = RunLog(Run(RunRequest(task="job")), OUTPUT_RUN_BYTES_MIN)
    widest = "\u00e9" * (LINE_LIMIT_BYTES // 2)  # 64 KiB of UTF-8, every character wide
    longest = "a" * (LINE_LIMIT_BYTES - 2) + "\u00e9"  # the most characters, one of them wide
    for line in ("x" * 1000, widest, "y" * 1000, longest):
        log.add("stdout", line)
        assert log.lines()[-1][1] == line  # the newest line is kept, whole
