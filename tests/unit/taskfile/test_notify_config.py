"""The tasks file's notifications: the defaults, a task's own table over them, the secrets'
three sources (never shown), and a clear error naming the table and key for each mistake."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.tasks.notify_targets import EVENTS, TaskNotify, heard_event
from daemon.taskfile import TaskConfigError, parse_tasks_toml
from daemon.taskfile.checking import check_tasks_text
from daemon.taskfile.notify_config import DEFAULT_ON, parse_notify_table

TOKEN = "https://hooks.example/abc?token=s3cr3t-value"

BASE = """
[notify]
max_silence = "2h"
[notify.webhook]
url = "https://hooks.example/abc?token=s3cr3t-value"
[notify.ping]
url = "https://ping.example/uuid"
on = ["success", "failure"]
attempts = 2
backoff = "250ms"
[notify.command]
command = ["/bin/echo", "notified"]
timeout = "3s"

[tasks.plain]
command = "true"

[tasks.own]
command = "true"
[tasks.own.notify]
ping = false
max_silence = "off"
[tasks.own.notify.webhook]
url = "http://own.example/hook"
on = ["start"]
"""


def test_every_task_gets_the_defaults_and_its_own_table_wins_kind_by_kind() -> None:
    tasks = parse_tasks_toml(BASE)
    plain = tasks["plain"].notify
    assert plain is not None
    assert plain.webhook is not None
    assert plain.ping is not None
    assert plain.webhook.on == DEFAULT_ON["webhook"]
    assert plain.ping.on == frozenset({"success", "failure"})
    assert (plain.ping.attempts, plain.ping.backoff_s) == (2, 0.25)
    assert plain.command is not None
    assert plain.command.argv == ("/bin/echo", "notified")
    assert plain.command.timeout_s == 3.0
    assert plain.max_silence_s == 7200.0
    own = tasks["own"].notify
    assert own is not None
    assert own.webhook is not None
    assert own.webhook.url.reveal() == "http://own.example/hook"
    assert own.webhook.on == frozenset({"start"})
    assert own.ping is None  # turned off
    assert own.command == plain.command  # the default kept
    assert own.max_silence_s is None


def test_no_notify_table_means_no_notifications() -> None:
    tasks = parse_tasks_toml('[tasks.a]\ncommand = "true"\n')
    assert tasks["a"].notify is None


def test_a_secret_is_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = parse_tasks_toml(BASE)
    notify = tasks["plain"].notify
    assert notify is not None
    for text in (repr(tasks), str(notify), repr(notify.webhook)):
        assert "s3cr3t" not in text
    assert notify.webhook is not None
    assert notify.webhook.url.reveal() == TOKEN


def test_a_url_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "url"
    secret.write_text(TOKEN + "\n")
    monkeypatch.setenv("NOTIFY_TEST_PING", "https://ping.example/from-env")
    text = f"""
[tasks.a]
command = "true"
[tasks.a.notify.webhook]
url_file = "{secret}"
[tasks.a.notify.ping]
url_env = "NOTIFY_TEST_PING"
"""
    notify = parse_tasks_toml(text)["a"].notify
    assert notify is not None
    assert notify.webhook is not None
    assert notify.ping is not None
    assert notify.webhook.url.reveal() == TOKEN
    assert notify.webhook.url.source == f"file {secret}"
    assert notify.ping.url.reveal() == "https://ping.example/from-env"
    assert notify.ping.url.source == "env NOTIFY_TEST_PING"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[tasks.a.notify]\nwebhok = false", "tasks.a.notify: unknown key 'webhok'"),
        ('[tasks.a.notify.webhook]\nurl = "ftp://x"', "tasks.a.notify.webhook: url: the URL"),
        ("[tasks.a.notify.webhook]\non = []", "set exactly one of 'url', 'url_file' or"),
        (
            '[tasks.a.notify.webhook]\nurl = "http://x"\nurl_env = "X"',
            "tasks.a.notify.webhook: set exactly one of",
        ),
        (
            '[tasks.a.notify.webhook]\nurl_env = "NOTIFY_TEST_UNSET_VAR"',
            "environment variable NOTIFY_TEST_UNSET_VAR is not set",
        ),
        ('[tasks.a.notify.webhook]\nurl_file = "/nonexistent/x"', "cannot read /nonexistent/x"),
        ('[tasks.a.notify.webhook]\nurl = "http://x"\nattempts = 0', "attempts must be from 1"),
        ('[tasks.a.notify.webhook]\nurl = "http://x"\ntimeout = "2m"', "timeout must be at most"),
        ('[tasks.a.notify.ping]\nurl = "http://x"\non = ["silence"]', "unknown event 'silence'"),
        ("[tasks.a.notify.command]\ncommand = []", "command must be a non-empty list"),
        ('[tasks.a.notify]\nmax_silence = "soon"', "tasks.a.notify: max_silence:"),
        ("[tasks.a.notify]\nmax_silence = 5", "max_silence must be a duration string"),
        ("[tasks.a.notify]\nping = 3", "tasks.a.notify.ping: must be a table, or false"),
    ],
)
def test_a_mistake_names_the_table_and_the_key(table: str, message: str) -> None:
    with pytest.raises(TaskConfigError, match=None) as raised:
        parse_tasks_toml(f'[tasks.a]\ncommand = "true"\n{table}\n')
    assert message in str(raised.value)


def test_a_mistake_in_the_defaults_names_them_and_hides_the_value() -> None:
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml('[notify.webhook]\nurl = "gopher://s3cr3t"\n')
    assert str(raised.value).startswith("tasks file: notify.webhook: url:")
    assert "s3cr3t" not in str(raised.value)


def test_check_reports_the_defaults_on_their_line() -> None:
    problems = check_tasks_text('[tasks.a]\ncommand = "true"\n[notify.webhook]\nurl = "x"\n')
    assert [problem.line for problem in problems] == [4]  # the line of the url key
    assert "notify.webhook: url:" in problems[0].message


_events = st.lists(st.sampled_from(EVENTS), unique=True)


@given(_events, st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=60))
def test_the_parser_keeps_what_it_is_given(
    events: list[str], attempts: int, timeout_s: int
) -> None:
    table = {
        "webhook": {
            "url": "https://x.example/h",
            "on": events,
            "attempts": attempts,
            "timeout": f"{timeout_s}s",
        }
    }
    notify = parse_notify_table("notify", table)
    assert isinstance(notify, TaskNotify)
    assert notify.webhook is not None
    assert notify.webhook.on == frozenset(events)
    assert (notify.webhook.attempts, notify.webhook.timeout_s) == (attempts, timeout_s)
    assert all(notify.wants(event) == (event in events) for event in EVENTS)


@given(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4))
def test_any_table_is_taken_or_refused_with_a_config_error(table: dict[str, object]) -> None:
    with contextlib.suppress(TaskConfigError):
        parse_notify_table("notify", table)


def test_an_auto_max_silence_needs_the_task_s_own_cadence() -> None:
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml('[tasks.a]\ncommand = "true"\n[tasks.a.notify]\nmax_silence = "auto"\n')
    assert "tasks.a.notify: max_silence = 'auto' needs the task's own interval" in str(raised.value)


def test_an_auto_max_silence_of_the_defaults_is_for_the_ticking_tasks() -> None:
    tasks = parse_tasks_toml(
        '[notify]\nmax_silence = "auto"\n'
        '[tasks.ticks]\ncommand = "true"\ninterval = "1m"\n'
        '[tasks.nightly]\ncommand = "true"\nschedule = "daily 02:00"\n'
        '[tasks.external]\ncommand = "true"\n'
    )
    for name in ("ticks", "nightly"):
        notify = tasks[name].notify
        assert notify is not None
        assert notify.max_silence_auto
    assert tasks["external"].notify is None


@pytest.mark.parametrize(
    ("on", "events", "changed", "heard"),
    [
        (["change"], ("failure",), True, "failure"),  # the first failure after a success
        (["change"], ("failure",), False, None),  # a failure after a failure
        (["change"], ("recovery", "success"), True, "recovery"),
        (["change"], ("success",), False, None),
        (["change"], ("start",), False, None),
        (["change"], ("silence",), False, None),
        (["change", "silence"], ("silence",), False, "silence"),
        (["change", "success"], ("recovery", "success"), True, "recovery"),
        (["change", "success"], ("success",), False, "success"),
        (["failure", "recovery"], ("failure",), False, "failure"),  # the default: every one
        (["success"], ("recovery", "success"), True, "success"),
    ],
)
def test_change_hears_the_first_failure_and_the_recovery_only(
    on: list[str], events: tuple[str, ...], changed: bool, heard: str | None
) -> None:
    assert heard_event(frozenset(on), events, changed) == heard
    table = {"webhook": {"url": "https://x.example/h", "on": on}}
    notify = parse_notify_table("notify", table)
    assert notify is not None
    assert notify.hears(events, changed) == (heard is not None)


def test_change_is_for_webhooks_and_commands_not_for_pings() -> None:
    tasks = parse_tasks_toml(
        '[notify.command]\ncommand = ["true"]\non = ["change"]\n'
        '[tasks.a]\ncommand = "true"\n[tasks.a.notify.webhook]\nurl = "http://x"\n'
        'on = ["change", "silence"]\n'
    )
    notify = tasks["a"].notify
    assert notify is not None
    assert notify.webhook is not None
    assert notify.webhook.on == frozenset({"change", "silence"})
    assert notify.command is not None
    assert notify.command.on == frozenset({"change"})
    assert notify.ping is None
    ping = '[tasks.a]\ncommand = "true"\n[tasks.a.notify.ping]\nurl = "http://x"\non = ["change"]\n'
    with pytest.raises(TaskConfigError, match="on: unknown event 'change'"):
        parse_tasks_toml(ping)
    (problem,) = check_tasks_text(ping)
    assert problem.line is not None
    assert "tasks.a.notify.ping: on: unknown event 'change'" in problem.message
