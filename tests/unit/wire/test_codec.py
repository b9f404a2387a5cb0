"""The wire format: requests decode or get a reason; the decoder never fails otherwise."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.runqueue import Event, Run, RunRequest, RunResult
from daemon.wire import reasons
from daemon.wire.codec import decode_request, encode_event, rejection
from daemon.wire.control_answers import cancel_refusal, health_answer, reload_answer
from daemon.wire.logs_answers import logs_refusal
from daemon.wire.protocol import (
    MAX_REQUEST_BYTES,
    NEXT_COUNT_MAX,
    CancelRequest,
    ControlRequest,
    HealthRequest,
    LogsRequest,
    NextRequest,
    ProtocolError,
    ReloadRequest,
    StatusRequest,
    SubmitRequest,
    decode_event,
    encode_request,
    overdue_event,
)
from daemon.wire.reasons import REASON_TOO_LARGE, REASON_UNDECODABLE
from tests.unit.conftest import REPO


def test_empty_object_runs_default() -> None:
    assert decode_request(b"{}\n") == SubmitRequest()


def test_submit_fields() -> None:
    line = b'{"task":"report","args":["-v"],"env":{"LEVEL":"2"}}\n'
    assert decode_request(line) == SubmitRequest("report", ("-v",), {"LEVEL": "2"})


def test_the_go_clients_requests_and_the_batch_field_are_taken() -> None:
    # trigger.Submit frames {} and {"task": NAME} (the Go reference client's payload struct).
    assert decode_request(b"{}\n") == SubmitRequest()
    assert decode_request(b'{"task":"report"}\n') == SubmitRequest("report")
    assert decode_request(b'{"task":"report","batch":true}') == SubmitRequest("report")
    logs = decode_request(b'{"op":"logs","task":"report","follow":true,"batch":true}')
    assert logs == LogsRequest(task="report", follow=True)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json\n", REASON_UNDECODABLE),
        (b"[1,2]\n", REASON_UNDECODABLE),
        (b"\xff\xfe\n", REASON_UNDECODABLE),
        (b'{"task": 5}', "invalid request: task must be a non-empty string"),
        (b'{"args": "x"}', "invalid request: args must be a list of strings"),
        (b'{"env": {"A": 1}}', "invalid request: env must be an object of strings"),
        (b'{"op": "reboot"}', "unknown op 'reboot'"),
        (b'{"op": "cancel"}', "cancel needs an id"),
        # a field the request does not take is refused by name, with the fields it takes
        (
            b'{"tsak":"report"}',
            "invalid request: unknown field 'tsak' (a run request takes args, batch, env, task)",
        ),
        (
            b'{"task":"report","agrs":["-v"]}',
            "invalid request: unknown field 'agrs' (a run request takes args, batch, env, task)",
        ),
        (
            b'{"task":"report","extra":1}',
            "invalid request: unknown field 'extra' (a run request takes args, batch, env, task)",
        ),
        (
            b'{"op":"status","verbose":true}',
            "invalid request: unknown field 'verbose' (op 'status' takes id, op)",
        ),
        (
            b'{"op":"cancel","id":"r1","force":true}',
            "invalid request: unknown field 'force' (op 'cancel' takes id, op)",
        ),
        (
            b'{"op":"logs","folow":true}',
            "invalid request: unknown field 'folow' "
            "(a logs request takes batch, follow, id, op, runs, task)",
        ),
    ],
)
def test_bad_requests_have_reasons(line: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(line)
    assert (excinfo.value.reason, excinfo.value.code) == (reason, "bad_request")


def test_oversized_request() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert excinfo.value.reason == REASON_TOO_LARGE


def test_deeply_nested_json_is_undecodable_not_a_crash() -> None:
    with pytest.raises(ProtocolError):
        decode_request(b"[" * 100_000 + b"]" * 100_000)


def test_control_requests() -> None:
    assert decode_request(b'{"op":"status"}') == StatusRequest()
    assert decode_request(b'{"op":"cancel","id":"r1"}') == CancelRequest("r1")


def test_event_omits_empty_reason_and_zero_duration() -> None:
    line = encode_event("done", True, reason="", code="", duration_ms=0, id="r1")
    assert line.endswith(b"\n")
    assert json.loads(line) == {"event": "done", "ok": True, "id": "r1"}
    assert decode_event(line) == {"event": "done", "ok": True, "id": "r1"}


def test_decode_event_ignores_garbage() -> None:
    assert decode_event(b"nope") is None
    assert decode_event(b'{"ok": true}') is None


# Lone surrogates cannot be a request's text (a test below): valid text without NUL can.
texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=20)
env_names = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\0="),
    min_size=1,
    max_size=20,
)


def _one_target(logs: LogsRequest) -> bool:
    """A logs request the daemon takes: an id or a task, or a list of runs alone."""
    return not (logs.id and logs.task) and not (logs.runs and (logs.id or logs.task or logs.follow))


requests = st.one_of(
    st.builds(
        SubmitRequest,
        task=texts.filter(bool),
        args=st.lists(texts, max_size=5).map(tuple),
        env=st.dictionaries(env_names, texts, max_size=5),
    ),
    st.sampled_from([StatusRequest(), HealthRequest()]),
    st.builds(CancelRequest, id=texts.filter(bool)),
    st.builds(ReloadRequest, dry_run=st.booleans()),
    st.builds(
        LogsRequest, id=texts, task=texts, follow=st.booleans(), runs=st.integers(0, 20)
    ).filter(
        lambda logs: (
            not (logs.id and logs.task)
            and not (logs.runs and (logs.id or logs.task or logs.follow))
        )
    ),
    st.builds(NextRequest, task=texts, count=st.integers(1, NEXT_COUNT_MAX)),
)


def test_a_lone_surrogate_is_undecodable() -> None:
    """It could not be passed to a program (no file name or argument can hold it)."""
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(b'{"args": ["\\ud800"]}')
    assert excinfo.value.reason == REASON_UNDECODABLE


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"args": ["safe\\u0000; rm -rf /"]}', "invalid request: args must not contain NUL"),
        (b'{"env": {"A": "x\\u0000y"}}', "invalid request: env values must not contain NUL"),
        (b'{"env": {"A\\u0000B": "x"}}', "invalid request: bad env name"),
        (b'{"env": {"A=B": "x"}}', "invalid request: bad env name"),
        (b'{"env": {"": "x"}}', "invalid request: bad env name"),
        (b'{"task": "a\\u0000b"}', "invalid request: bad task"),
    ],
)
def test_nul_characters_and_bad_env_names_are_refused(line: bytes, reason: str) -> None:
    """execve ends a string at its NUL: such a request is refused, never run cut short."""
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(line)
    assert excinfo.value.reason.startswith(reason)


@pytest.mark.parametrize(
    "line",
    [
        b'{"task": "%s"}' % (b"t" * 1_000_000),
        b'{"op": "%s"}' % (b"o" * 1_000_000),
        b'{"op": "cancel", "id": "%s"}' % (b"i" * 1_000_000),
    ],
)
def test_huge_names_are_refused_and_never_echoed_in_full(line: bytes) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(line)
    assert len(excinfo.value.reason) < 200


@given(requests)
def test_request_round_trip(request: SubmitRequest | ControlRequest) -> None:
    assert decode_request(encode_request(request)) == request


@given(st.binary(max_size=2048))
def test_fuzz_decoder_only_raises_protocol_error(data: bytes) -> None:
    try:
        decode_request(data)
    except ProtocolError as exc:
        assert exc.reason


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.sampled_from(["task", "args", "env", "op", "id", "x"]), json_values))
def test_fuzz_structured_requests(obj: dict[str, object]) -> None:
    try:
        request = decode_request(json.dumps(obj).encode())
    except ProtocolError as exc:
        assert exc.reason
    else:
        assert isinstance(request, SubmitRequest | ControlRequest)


# -- the code beside each reason ---------------------------------------------------------------
def _done_fields(result: RunResult) -> dict[str, Any]:
    """The ``done`` event a listener hears when a run ends with ``result``."""
    heard: list[Event] = []
    run = Run(RunRequest())
    run._listeners.append(lambda _run, event: heard.append(event))
    run.finish(result)
    (done,) = heard
    return dict(done.fields)


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (RunResult(ok=False, reason="exit status 3", exit_code=3), "failed"),
        (RunResult(ok=False, reason=reasons.exit_reason(None, "SIGKILL")), "failed"),
        (RunResult(ok=False, reason=reasons.REASON_NOT_JSON), "failed"),
        (RunResult(ok=False, reason=reasons.REASON_FULL), "failed"),  # a handler's own words
        (RunResult(ok=False, reason=reasons.timed_out_reason(2), timed_out=True), "timeout"),
        (RunResult(ok=False, reason=reasons.REASON_USER_CANCEL, cancelled=True), "cancelled"),
        (RunResult(ok=False, reason=reasons.REASON_SHUTDOWN_CANCEL, cancelled=True), "shutdown"),
        (RunResult(ok=False, reason=reasons.REASON_INTERRUPTED, cancelled=True), "interrupted"),
        (RunResult(ok=False, reason=reasons.REASON_FENCED, cancelled=True), "fenced"),
        (RunResult(ok=False, reason=reasons.REASON_LEASE_LOST, cancelled=True), "lease_lost"),
        (RunResult(ok=False, reason=reasons.REASON_JOB_REMOVED, cancelled=True), "job_removed"),
        (
            RunResult(ok=False, reason=reasons.removed_task_reason("x"), code="unknown_task"),
            "unknown_task",
        ),
    ],
)
def test_a_runs_done_carries_the_code_of_its_reason(result: RunResult, code: str) -> None:
    fields = _done_fields(result)
    assert (fields["reason"], fields["code"]) == (result.reason, code)
    line = json.loads(encode_event("done", fields.pop("ok"), **fields))
    assert (line["reason"], line["code"]) == (result.reason, code)


def test_a_result_without_a_reason_has_no_code() -> None:
    assert "code" not in _done_fields(RunResult(ok=True, exit_code=0))
    assert "code" not in _done_fields(RunResult(ok=False, exit_code=1))


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (overdue_event("r1", reasons.overdue_reason(5)), "overdue"),
        (cancel_refusal("r1"), "no_such_run"),
        (logs_refusal("no run 'r1'"), "no_such_run"),
        (health_answer("executor wedged"), "unhealthy"),
        (reload_answer(False, "tasks file /x: line 1"), "reload_refused"),
        (reload_answer(False, reasons.REASON_CLOSED, None, "shutting_down"), "shutting_down"),
        (json.loads(rejection(reasons.REASON_FULL, "queue_full")), "queue_full"),
    ],
)
def test_every_answer_with_a_reason_carries_its_code(answer: dict[str, Any], code: str) -> None:
    assert answer["reason"]
    assert answer["code"] == code
    assert code in _codes()


def test_an_answer_without_a_reason_has_no_code() -> None:
    assert "code" not in json.loads(encode_event(**health_answer(None)))
    assert "code" not in reload_answer(True, "", {"added": ["a"]})


def _codes() -> set[str]:
    return {value for name, value in vars(reasons).items() if name.startswith("CODE_")}


def test_the_protocol_page_lists_every_code_once_with_its_exit_code() -> None:
    """The protocol page's table of codes is the contract: each code in it is one ``reasons`` sends,
    and a client exits 75 for those ``worth_a_retry`` tells by their code, 69 for a refusal of
    its user."""
    section = (REPO / "docs" / "protocol.md").read_text()
    table = section.split("| `code` | when (the reason's words) | exit code |", 1)[1]
    rows = re.findall(r"^\| `([a-z_]+)` \| .* \| ([^|]*) \|$", table, re.MULTILINE)
    assert sorted(code for code, _exit in rows) == sorted(_codes())
    exits = dict(rows)
    retried = {code for code in exits if reasons.worth_a_retry({"code": code})}
    assert retried == {code for code, said in exits.items() if said == "75"}
    refused = {code for code in exits if reasons.refused_user({"code": code})}
    assert refused == {code for code, said in exits.items() if said == "69"}
