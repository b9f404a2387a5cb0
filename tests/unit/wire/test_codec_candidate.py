"""A reload dry run's candidate file on the wire (``reload --dry-run --file``): its bytes as
base64 and its name, decoded exactly or refused with a reason naming the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.wire.codec import decode_request
from daemon.wire.protocol import (
    MAX_PATH_CHARS,
    ProtocolError,
    ReloadRequest,
    encode_request,
)


@given(content=st.binary(max_size=4096), file=st.text(min_size=1, max_size=64))
def test_any_bytes_and_name_come_back_as_sent(content: bytes, file: str) -> None:
    request = ReloadRequest(dry_run=True, file=file, content=content)
    if "\0" in file:
        with pytest.raises(ProtocolError, match="bad file"):
            decode_request(encode_request(request))
        return
    decoded = decode_request(encode_request(request))
    assert isinstance(decoded, ReloadRequest)
    assert (decoded.file, decoded.content, decoded.dry_run) == (file, content, True)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(file=JSON, content=JSON, dry_run=JSON)
def test_any_value_is_taken_or_refused_with_a_reason(
    file: object, content: object, dry_run: object
) -> None:
    line = json.dumps({"op": "reload", "dry_run": dry_run, "file": file, "content": content})
    try:
        decoded = decode_request(line.encode())
    except ProtocolError as exc:
        assert str(exc).startswith("invalid request")
        return
    assert isinstance(decoded, ReloadRequest)
    assert decoded.dry_run is True
    assert isinstance(decoded.content, bytes)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"file": "a.toml", "content": ""}, "file and content need dry_run"),
        ({"dry_run": True, "file": "a.toml"}, "content must be a base64 string"),
        ({"dry_run": True, "file": "a.toml", "content": "not base64!"}, "base64"),
        ({"dry_run": True, "content": "dGFza3M="}, "file must be a non-empty string"),
        ({"dry_run": True, "file": "", "content": ""}, "file must be a non-empty string"),
        ({"dry_run": True, "file": "x" * (MAX_PATH_CHARS + 1), "content": ""}, "bad file"),
    ],
)
def test_a_bad_candidate_is_refused_naming_the_field(
    fields: dict[str, object], reason: str
) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_request(json.dumps({"op": "reload", **fields}).encode())


def test_without_a_candidate_the_dry_run_is_of_the_tasks_file() -> None:
    decoded = decode_request(b'{"op": "reload", "dry_run": true}')
    assert isinstance(decoded, ReloadRequest)
    assert (decoded.file, decoded.content) == ("", None)
    assert b"content" not in encode_request(ReloadRequest(dry_run=True))
