"""A URL put by mistake in ``url_env`` or ``url_file`` (or a token in ``url_env``) is refused
naming the key, and its value is in no error: not the loader's, not ``check``'s."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.taskfile import TaskConfigError, parse_tasks_toml
from daemon.taskfile.checking import check_tasks_text
from daemon.taskfile.notify_secret import looks_like_url, read_secret

TOKEN = "SEKRET0123456789"
URLS = [
    f"https://hc-ping.example/{TOKEN}",
    f"HTTP://hooks.example/x?token={TOKEN}",
    f"https//hc-ping.example/{TOKEN}",  # the colon missed
    f"hc-ping.example/{TOKEN}",  # no scheme at all
    f"www.hooks.example/{TOKEN}",
    f"  https://hooks.example/{TOKEN}  ",
    f"http:{TOKEN}",
]


def _file_with(key: str, value: str, defaults: bool = False) -> str:
    task = '[tasks.a]\ncommand = "true"\n[tasks.a.notify.webhook]'
    table = "[notify.webhook]" if defaults else task
    return f"{table}\n{key} = {json.dumps(value)}\n"


@pytest.mark.parametrize("key", ["url_env", "url_file"])
@pytest.mark.parametrize("value", URLS)
def test_a_url_in_url_env_or_url_file_is_named_by_its_key_and_never_shown(
    key: str, value: str
) -> None:
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml(_file_with(key, value))
    message = str(raised.value)
    assert f"tasks.a.notify.webhook: {key}: the value looks like a URL (not shown)" in message
    assert TOKEN not in message
    (problem,) = check_tasks_text(_file_with(key, value))
    assert TOKEN not in problem.message
    assert problem.line is not None


def test_a_url_env_that_is_no_variable_name_is_not_shown() -> None:
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml(_file_with("url_env", f"{TOKEN}-{TOKEN}"))
    assert "url_env: must be an environment variable's name" in str(raised.value)
    assert TOKEN not in str(raised.value)


@pytest.mark.parametrize("name", ["HTTP_HOOK_URL", "HTTPS_PING", "www_hook", "_X1"])
def test_a_variable_name_like_a_scheme_is_still_a_name(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(name, raising=False)
    with pytest.raises(TaskConfigError, match=f"environment variable {name} is not set"):
        read_secret("notify.webhook", {"url_env": name})
    monkeypatch.setenv(name, "https://hooks.example/h")
    assert read_secret("notify.webhook", {"url_env": name}).source == f"env {name}"


@pytest.mark.parametrize("path", ["/run/secrets/hook_url", "secrets/httpd.conf", "config.d/url"])
def test_a_file_s_path_is_no_url(path: str) -> None:
    assert not looks_like_url(path)


_token = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="\"'\\"),
    min_size=6,
    max_size=40,
)
_scheme = st.from_regex(r"[A-Za-z][A-Za-z0-9+.-]{0,10}", fullmatch=True)
_host = st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,2}\.[a-z]{2,6}", fullmatch=True)
_url_like = st.one_of(
    st.builds(lambda s, h, t: f"{s}://{h}/{t}", _scheme, _host, _token),
    st.builds(lambda h, t: f"{h}/{t}", _host, _token),
    st.builds(lambda p, t: f"{p}{t}", st.sampled_from(["http:", "https//", "www."]), _token),
)


@given(
    _url_like,
    st.sampled_from(["url_env", "url_file"]),
    st.booleans(),
)
def test_no_error_contains_a_url_given_to_url_env_or_url_file(
    value: str, key: str, defaults: bool
) -> None:
    text = _file_with(key, value, defaults)
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml(text)
    where = "notify.webhook" if defaults else "tasks.a.notify.webhook"
    holder = "the file" if key == "url_file" else "the environment variable"
    said = (
        f"{where}: {key}: the value looks like a URL (not shown): a URL goes in 'url';"
        f" {key} names {holder} that holds it"
    )  # a fixed text: no part of the value is in it
    assert str(raised.value) in (said, f"tasks file: {said}")
    assert [problem.message for problem in check_tasks_text(text)] == [said]


@given(st.text(min_size=1, max_size=40).filter(lambda v: not (v.isidentifier() and v.isascii())))
def test_no_error_contains_a_url_env_that_is_no_variable_name(value: str) -> None:
    with pytest.raises(TaskConfigError) as raised:
        read_secret("notify.webhook", {"url_env": value})
    assert str(raised.value) in (  # fixed texts: no part of the value is in them
        "notify.webhook: url_env: must be an environment variable's name (letters, digits and"
        " '_', not starting with a digit; the value is not shown)",
        "notify.webhook: url_env: the value looks like a URL (not shown): a URL goes in 'url';"
        " url_env names the environment variable that holds it",
    )
