"""The ``logs`` op's requests decoded (daemon/wire/codec.py): each form, the client's own
encoding of it, and a reason for every bad one."""

from __future__ import annotations

import pytest

from daemon.wire.codec import decode_request
from daemon.wire.protocol import LogsRequest, ProtocolError, encode_request


@pytest.mark.parametrize(
    ("line", "request_"),
    [
        (b'{"op":"logs"}', LogsRequest()),
        (b'{"op":"logs","id":"r1a2b3c4d-7"}', LogsRequest(id="r1a2b3c4d-7")),
        (
            b'{"op":"logs","task":"report","follow":true}',
            LogsRequest("", "report", True),
        ),
        (b'{"op":"logs","follow":false}', LogsRequest()),
        (b'{"op":"logs","runs":5}', LogsRequest(runs=5)),
    ],
)
def test_logs_requests_decode(line: bytes, request_: LogsRequest) -> None:
    assert decode_request(line) == request_
    assert decode_request(encode_request(request_)) == request_  # the client's form too


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"op":"logs","follow":"yes"}', "invalid request: follow must be true or false"),
        (b'{"op":"logs","follow":1}', "invalid request: follow must be true or false"),
        (b'{"op":"logs","runs":-1}', "invalid request: runs must be a number from 0 to 10000"),
        (b'{"op":"logs","runs":true}', "invalid request: runs must be a number from 0 to 10000"),
        (b'{"op":"logs","runs":"5"}', "invalid request: runs must be a number from 0 to 10000"),
        (b'{"op":"logs","runs":10001}', "invalid request: runs must be a number from 0 to 10000"),
        (b'{"op":"logs","task":7}', "invalid request: task must be a string"),
        (b'{"op":"logs","id":7}', "invalid request: id must be a string"),
        (
            b'{"op":"logs","id":"r1-1","task":"a"}',
            "invalid request: logs takes an id or a task, not both",
        ),
        (b'{"op":"logs","runs":5,"follow":true}', "invalid request: logs with runs lists runs"),
        (b'{"op":"logs","runs":5,"id":"r1-1"}', "invalid request: logs with runs lists runs"),
        (b'{"op":"logs","runs":5,"task":"a"}', "invalid request: logs with runs lists runs"),
        (b'{"op":"logs","task":"a\\u0000b"}', "invalid request: bad task 'a\\x00b'"),
        (b'{"op":"logs","id":"' + b"r" * 300 + b'"}', "invalid request: bad id"),
    ],
)
def test_bad_logs_requests_have_reasons(line: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_request(line)
    assert caught.value.reason.startswith(reason)
