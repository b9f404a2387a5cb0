"""The wire format: requests decode or get a reason; the decoder never fails otherwise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.wire.codec import decode_request, encode_event
from daemon.wire.protocol import (
    MAX_REQUEST_BYTES,
    ControlRequest,
    ProtocolError,
    SubmitRequest,
    decode_event,
    encode_request,
)
from daemon.wire.reasons import REASON_TOO_LARGE, REASON_UNDECODABLE


def test_empty_object_runs_default() -> None:
    assert decode_request(b"{}\n") == SubmitRequest()


def test_submit_fields() -> None:
    line = b'{"task":"report","args":["-v"],"env":{"LEVEL":"2"}}\n'
    assert decode_request(line) == SubmitRequest("report", ("-v",), {"LEVEL": "2"})


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"tsak":"report"}', "unknown field 'tsak' (a run request takes args, batch, env, task)"),
        (b'{"task":"report","agrs":["-v"]}', "unknown field 'agrs'"),
        (b'{"task":"report","extra":1}', "unknown field 'extra'"),
        (b'{"op":"status","verbose":true}', "unknown field 'verbose' (op 'status' takes id, op)"),
        (b'{"op":"cancel","id":"r1","force":true}', "unknown field 'force'"),
        (b'{"op":"logs","folow":true}', "unknown field 'folow' (a logs request takes batch, "),
    ],
)
def test_a_field_the_request_does_not_take_is_refused_by_name(line: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(line)
    assert excinfo.value.reason.startswith(f"invalid request: {reason}")


def test_the_go_clients_requests_and_the_batch_field_are_taken() -> None:
    # trigger.Submit frames {} and {"task": NAME} (the Go reference client's payload struct).
    assert decode_request(b"{}\n") == SubmitRequest()
    assert decode_request(b'{"task":"report"}\n') == SubmitRequest("report")
    assert decode_request(b'{"task":"report","batch":true}') == SubmitRequest("report")
    logs = decode_request(b'{"op":"logs","task":"report","follow":true,"batch":true}')
    assert logs == ControlRequest("logs", task="report", follow=True)


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
    ],
)
def test_bad_requests_have_reasons(line: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(line)
    assert excinfo.value.reason == reason


def test_oversized_request() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        decode_request(b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert excinfo.value.reason == REASON_TOO_LARGE


def test_deeply_nested_json_is_undecodable_not_a_crash() -> None:
    with pytest.raises(ProtocolError):
        decode_request(b"[" * 100_000 + b"]" * 100_000)


def test_control_requests() -> None:
    assert decode_request(b'{"op":"status"}') == ControlRequest("status")
    assert decode_request(b'{"op":"cancel","id":"r1"}') == ControlRequest("cancel", "r1")


def test_event_omits_empty_reason_and_zero_duration() -> None:
    line = encode_event("done", True, reason="", duration_ms=0, id="r1")
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
requests = st.one_of(
    st.builds(
        SubmitRequest,
        task=texts.filter(bool),
        args=st.lists(texts, max_size=5).map(tuple),
        env=st.dictionaries(env_names, texts, max_size=5),
    ),
    st.builds(ControlRequest, op=st.sampled_from(["status", "health"])),
    st.builds(ControlRequest, op=st.just("cancel"), id=texts.filter(bool)),
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
