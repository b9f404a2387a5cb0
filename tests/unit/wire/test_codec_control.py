"""Control requests decoded to their types: one decoding case a type, the decoder's answers over
a recorded corpus the same as before the types, and any line a typed request or a refusal."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from daemon.wire.codec import DECODERS, decode_request
from daemon.wire.protocol import (
    CONTROL_REQUESTS,
    ControlRequest,
    NextRequest,
    ProtocolError,
    StatusRequest,
    SubmitRequest,
)

# Each line with its refusal (reason, code) or its request's fields, as the decoder before the
# control request types answered it.
CORPUS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "decode_corpus.json").read_text()
)["lines"]


def _fields(request: ControlRequest) -> dict[str, object]:
    names: tuple[str, ...] = type(request).__slots__
    fields: dict[str, object] = {"op": request.op}
    for name in names:
        value = getattr(request, name)
        fields[name] = base64.b64encode(value).decode() if isinstance(value, bytes) else value
    return fields


def _outcome(line: bytes) -> dict[str, Any]:
    """What the decoder makes of ``line``, in the corpus's terms."""
    try:
        request = decode_request(line)
    except ProtocolError as exc:
        return {"refused": [exc.reason, exc.code]}
    if isinstance(request, SubmitRequest):
        fields = {"task": request.task, "args": list(request.args), "env": request.env}
        return {"submit": {**fields, "batch": request.batch}}
    return {"control": _fields(request)}


def test_every_line_of_the_corpus_is_answered_as_before() -> None:
    differ = [
        (entry["line"], entry, got)
        for entry in CORPUS
        if (got := _outcome(entry["line"].encode()))
        != {k: v for k, v in entry.items() if k != "line"}
    ]
    assert not differ, differ[:5]
    # The corpus holds every op the decoder knew when it was recorded.
    recorded = {entry["control"]["op"] for entry in CORPUS if "control" in entry}
    assert recorded == {"status", "health", "cancel", "reload", "logs", "next"}


def _decoding_gaps(
    kinds: tuple[type[ControlRequest], ...], decoders: dict[type[ControlRequest], object]
) -> list[str]:
    """What keeps each control request type from exactly one decoding case: its own in
    ``decoders``, or, for a type without fields, the plain one; and its op named once."""
    gaps = [
        f"{kind.__name__} has fields and no decoding case"
        for kind in kinds
        if kind.__slots__ and kind not in decoders
    ]
    gaps += [f"{kind.__name__} is no control request" for kind in decoders if kind not in kinds]
    ops = [kind.op for kind in kinds]
    gaps += [f"op {op!r} names two types" for op in sorted(set(ops)) if ops.count(op) > 1]
    return gaps


def test_every_control_request_type_has_one_decoding_case() -> None:
    assert _decoding_gaps(CONTROL_REQUESTS, dict(DECODERS)) == []


def test_the_decoding_check_sees_a_missing_case_and_a_doubled_op() -> None:
    missing = {kind: case for kind, case in DECODERS.items() if kind is not NextRequest}
    assert _decoding_gaps(CONTROL_REQUESTS, dict(missing)) == [
        "NextRequest has fields and no decoding case"
    ]

    class Another(StatusRequest):
        __slots__ = ()

    doubled = (*CONTROL_REQUESTS, Another)
    assert _decoding_gaps(doubled, dict(DECODERS)) == ["op 'status' names two types"]


# A reason repeats the client's text quoted: masked, the reasons are the corpus's.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'")


def _masked(reason: str) -> str:
    return _QUOTED.sub("'…'", reason)


KNOWN_REASONS = {_masked(entry["refused"][0]) for entry in CORPUS if "refused" in entry}
FIELDS = sorted({"op", "x", "args", "env"} | {f for kind in CONTROL_REQUESTS for f in kind.takes})
# No quote or backslash: an echoed text is quoted as '...' and masked whole.
texts = st.text(st.sampled_from("ab r1-7:T+Z0\0é"), max_size=12)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 120),
    st.floats(allow_nan=False),
    texts,
    st.sampled_from(["2026-10-03T12:00:00Z", "aGk=", "r1a2b3c4d-7"]),
    st.lists(texts, max_size=3),
    st.dictionaries(texts, texts, max_size=2),
)
ops = st.one_of(st.sampled_from([kind.op for kind in CONTROL_REQUESTS]), texts, values)


@given(ops, st.dictionaries(st.sampled_from(FIELDS), values, max_size=5))
def test_any_request_line_is_a_typed_request_or_a_refusal_said_as_before(
    op: object, obj: dict[str, object]
) -> None:
    obj = {**obj, "op": op} if op is not None else obj
    try:
        request = decode_request(json.dumps(obj).encode())
    except ProtocolError as exc:
        assert _masked(exc.reason) in KNOWN_REASONS, exc.reason
        assert exc.code == "bad_request"
        return
    if isinstance(request, SubmitRequest):
        assert "op" not in obj
    else:
        assert type(request) in CONTROL_REQUESTS
        assert request.op == obj["op"]
