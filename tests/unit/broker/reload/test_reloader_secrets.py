"""A URL put by mistake in a notification's ``url_env`` or ``url_file``: a refused reload
names the key, and the value is in none of the answer, the ``tasks.reload_refused`` line,
``health``'s warning or ``status``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from daemon.observe.status import health_answer, status_answer
from tests.unit.broker.reload.conftest import TASKS, MakeBroker, replace_file

_token = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="\"'\\"),
    min_size=8,
    max_size=40,
)
_url = st.builds(
    lambda scheme, token: f"{scheme}hc-ping.example/{token}",
    st.sampled_from(["https://", "http://", "HTTPS://", "https//", "", "www."]),
    _token,
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_url, st.sampled_from(["url_env", "url_file"]))
def test_no_answer_log_line_warning_or_status_shows_the_value(
    make_broker: MakeBroker, tasks_file: Path, value: str, key: str
) -> None:
    replace_file(tasks_file, TASKS)
    broker = make_broker()  # one per example: each sees its own refusal alone
    notify = f"[tasks.keep.notify.webhook]\n{key} = {json.dumps(value)}\n"
    replace_file(tasks_file, TASKS + notify)
    with capture_logs() as logs:
        answer = asyncio.run(broker.reloader.answer())
    assert answer["ok"] is False
    assert f"tasks.keep.notify.webhook: {key}: the value looks like a URL" in answer["reason"]
    (refused,) = [line for line in logs if line["event"] == "tasks.reload_refused"]
    warnings = health_answer(broker).get("warnings", [])
    assert any(f"{key}: the value looks like a URL" in warning for warning in warnings)
    status = status_answer(broker)
    shown = [json.dumps(answer), repr(logs), json.dumps(warnings), json.dumps(status)]
    assert [value in text or value.strip() in text for text in shown] == [False] * len(shown)
    assert refused["error"] == answer["reason"]
