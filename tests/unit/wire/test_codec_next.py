"""The ``next`` op and reload's ``dry_run`` on the wire (daemon/wire/protocol.py, codec.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from daemon.wire.codec import decode_request, parse_instant
from daemon.wire.protocol import (
    NEXT_COUNT_DEFAULT,
    NEXT_COUNT_MAX,
    ControlRequest,
    NextRequest,
    ProtocolError,
    ReloadRequest,
    encode_request,
)


def test_a_next_request_names_a_task_and_a_count() -> None:
    request = decode_request(b'{"op":"next","task":"report","count":3}\n')
    assert request == NextRequest(task="report", count=3)
    every = decode_request(b'{"op":"next"}')
    assert every == NextRequest(count=NEXT_COUNT_DEFAULT)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"op":"next","count":0}', "count must be a number from 1 to"),
        (b'{"op":"next","count":%d}' % (NEXT_COUNT_MAX + 1), "count must be a number"),
        (b'{"op":"next","count":true}', "count must be a number"),
        (b'{"op":"next","count":"5"}', "count must be a number"),
        (b'{"op":"next","task":5}', "task must be a string"),
        (b'{"op":"next","id":"r1"}', "unknown field 'id'"),
        (b'{"op":"reload","dry_run":"yes"}', "dry_run must be true or false"),
        (b'{"op":"reload","count":1}', "unknown field 'count'"),
        (b'{"op":"status","dry_run":true}', "unknown field 'dry_run'"),
    ],
)
def test_a_malformed_request_is_refused_with_its_reason(line: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_request(line)


def test_reload_takes_a_dry_run() -> None:
    assert decode_request(b'{"op":"reload","dry_run":true}') == ReloadRequest(dry_run=True)
    assert decode_request(b'{"op":"reload"}') == ReloadRequest()
    assert ReloadRequest(dry_run=True) != ReloadRequest()


@pytest.mark.parametrize(
    "request_",
    [
        NextRequest(task="report", count=7),
        NextRequest(count=1),
        ReloadRequest(dry_run=True),
        NextRequest(count=2, after="2026-10-03T12:00:00Z"),
    ],
)
def test_what_the_client_sends_the_daemon_reads_back(request_: ControlRequest) -> None:
    assert decode_request(encode_request(request_)) == request_


def test_next_may_ask_from_an_instant_with_an_offset() -> None:
    request = decode_request(b'{"op":"next","after":"2026-03-28T00:00:00+01:00"}')
    assert request == NextRequest(count=NEXT_COUNT_DEFAULT, after="2026-03-28T00:00:00+01:00")
    assert parse_instant("2026-03-28T00:00:00Z") == datetime(2026, 3, 28, tzinfo=UTC)
    assert parse_instant("2026-03-27T23:00:00-01:00") == datetime(2026, 3, 28, tzinfo=UTC)
    for text in ("2026-03-28T00:00:00", "2026-03-28", "tomorrow", "9999-12-31T23:59:59-01:00"):
        assert parse_instant(text) is None, text
        with pytest.raises(ProtocolError, match="after must be an RFC 3339 time"):
            decode_request(b'{"op":"next","after":"%s"}' % text.encode())
