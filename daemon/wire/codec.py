"""The daemon's side of the JSON lines: a request line decoded, answer lines encoded.

orjson, loaded on first use so that the thin client never pays for it: it encodes a line in
about a tenth of ``json.dumps``'s time, and refuses what a request must not carry.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from daemon.log.jsonlines import json_lines
from daemon.wire.logs_answers import MAX_LISTED_RUNS
from daemon.wire.protocol import (
    CONTROL_REQUESTS,
    EVENT_DONE,
    EVENT_OUTPUT,
    MAX_ARGS,
    MAX_ENV,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_REQUEST_BYTES,
    NEXT_COUNT_DEFAULT,
    NEXT_COUNT_MAX,
    SUBMIT_FIELDS,
    CancelRequest,
    ControlRequest,
    LogsRequest,
    NextRequest,
    ProtocolError,
    ReloadRequest,
    Request,
    SubmitRequest,
    answer_body,
    clip,
)
from daemon.wire.reasons import REASON_TOO_LARGE, REASON_UNDECODABLE


def _string_list(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ProtocolError(f"invalid request: {name} must be a list of strings")
    if len(value) > MAX_ARGS:
        raise ProtocolError(f"invalid request: at most {MAX_ARGS} {name}")
    if any("\0" in item for item in value):
        # execve would end the string at the NUL: "safe\0; rm -rf /" must not run as "safe".
        raise ProtocolError(f"invalid request: {name} must not contain NUL characters")
    return tuple(value)


def _string_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ProtocolError(f"invalid request: {name} must be an object of strings")
    if len(value) > MAX_ENV:
        raise ProtocolError(f"invalid request: at most {MAX_ENV} {name} entries")
    for key, item in value.items():
        if not key or "=" in key or "\0" in key or len(key) > MAX_NAME_CHARS:
            raise ProtocolError(f"invalid request: bad {name} name {clip(key)!r}")
        if "\0" in item:
            raise ProtocolError(f"invalid request: {name} values must not contain NUL characters")
    return dict(value)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"invalid request: {what} must be a non-empty string")
    if len(value) > MAX_NAME_CHARS or "\0" in value:
        raise ProtocolError(f"invalid request: bad {what} {clip(value)!r}")
    return value


_loads: Any = None
_dumps: Any = None


def _import_orjson() -> None:
    """orjson's decoder and encoder, imported on first use of either."""
    global _loads, _dumps
    import orjson

    _loads, _dumps = orjson.loads, orjson.dumps


def _candidate(obj: Mapping[str, Any], dry_run: bool) -> tuple[str, bytes | None]:
    """A reload dry run's candidate file: its name and its bytes (None: the tasks file)."""
    if "file" not in obj and "content" not in obj:
        return "", None
    if not dry_run:
        raise ProtocolError("invalid request: file and content need dry_run")
    file, content = obj.get("file"), obj.get("content")
    if not isinstance(file, str) or not file:
        raise ProtocolError("invalid request: file must be a non-empty string")
    if len(file) > MAX_PATH_CHARS or "\0" in file:
        raise ProtocolError(f"invalid request: bad file {clip(file)!r}")
    if not isinstance(content, str):
        raise ProtocolError("invalid request: content must be a base64 string")
    try:
        return file, base64.b64decode(content, validate=True)
    except ValueError:  # binascii.Error
        raise ProtocolError("invalid request: content must be a base64 string") from None


def _load_json(line: bytes) -> Any:
    if _loads is None:
        _import_orjson()
    return _loads(line)


def decode_request(line: bytes) -> Request:
    """Parse one request line, with or without its newline, or raise ``ProtocolError``."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ProtocolError(REASON_TOO_LARGE)
    try:
        obj = _loads(line) if _loads is not None else _load_json(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError(REASON_UNDECODABLE) from None
    if not isinstance(obj, dict):
        raise ProtocolError(REASON_UNDECODABLE)
    op = obj.get("op")
    if op is not None:
        return _control_request(obj, op)
    _known_fields(obj, SUBMIT_FIELDS, "a run request")
    task = _name(obj["task"], "task") if "task" in obj else "default"
    args = obj.get("args")
    env = obj.get("env")
    return SubmitRequest(
        task,
        _string_list(args, "args") if args is not None else (),
        _string_map(env, "env") if env is not None else None,
        _batch(obj),
    )


def _batch(obj: dict[str, Any]) -> bool:
    batch = obj.get("batch", False)
    if not isinstance(batch, bool):
        raise ProtocolError("invalid request: batch must be true or false")
    return batch


def _known_fields(obj: dict[str, Any], known: frozenset[str], what: str) -> None:
    """Refuse a field the request does not take, naming it and those it does take."""
    if obj.keys() <= known:
        return
    unknown = next(key for key in obj if key not in known)
    raise ProtocolError(
        f"invalid request: unknown field {clip(unknown)!r} ({what} takes "
        f"{', '.join(sorted(known))})"
    )


def _control_request(obj: dict[str, Any], op: object) -> ControlRequest:
    """A control request of the type its ``op`` names, decoded by that type's case."""
    kind = _BY_OP.get(op) if isinstance(op, str) else None
    if kind is None:
        raise ProtocolError(f"unknown op {clip(op)!r}" if isinstance(op, str) else "invalid op")
    run_id = obj.get("id", "")
    if not isinstance(run_id, str):
        raise ProtocolError("invalid request: id must be a string")
    decode = DECODERS.get(kind)
    if decode is None:  # an op without fields of its own: ``_control_with_no_fields``
        _known_fields(obj, kind.takes, f"op {op!r}")
        return _control_with_no_fields(kind)
    return decode(obj, run_id)


def _control_with_no_fields(kind: type[ControlRequest]) -> ControlRequest:
    return kind()  # type: ignore[call-arg]  # the types with fields have their own case


def _cancel_request(obj: dict[str, Any], run_id: str) -> CancelRequest:
    if not run_id:
        raise ProtocolError("cancel needs an id")
    _name(run_id, "id")
    _known_fields(obj, CancelRequest.takes, "op 'cancel'")
    return CancelRequest(run_id)


def _reload_request(obj: dict[str, Any], _run_id: str) -> ReloadRequest:
    _known_fields(obj, ReloadRequest.takes, "a reload request")
    dry_run = obj.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ProtocolError("invalid request: dry_run must be true or false")
    file, content = _candidate(obj, dry_run)
    return ReloadRequest(dry_run=dry_run, file=file, content=content)


def _logs_request(obj: dict[str, Any], run_id: str) -> LogsRequest:
    """``{"op": "logs"}`` with a run ``id`` or a ``task`` (or neither), and ``follow``."""
    _known_fields(obj, LogsRequest.takes, "a logs request")
    task = obj.get("task", "")
    follow = obj.get("follow", False)
    if not isinstance(task, str):
        raise ProtocolError("invalid request: task must be a string")
    if not isinstance(follow, bool):
        raise ProtocolError("invalid request: follow must be true or false")
    runs = obj.get("runs", 0)
    if not isinstance(runs, int) or isinstance(runs, bool) or not 0 <= runs <= MAX_LISTED_RUNS:
        raise ProtocolError(f"invalid request: runs must be a number from 0 to {MAX_LISTED_RUNS}")
    if run_id and task:
        raise ProtocolError("invalid request: logs takes an id or a task, not both")
    if runs and (run_id or task or follow):
        raise ProtocolError("invalid request: logs with runs lists runs: no id, task or follow")
    if run_id:
        _name(run_id, "id")
    if task:
        _name(task, "task")
    return LogsRequest(id=run_id, task=task, follow=follow, runs=runs, batch=_batch(obj))


def _next_request(obj: dict[str, Any], _run_id: str) -> NextRequest:
    """``{"op": "next"}`` with a ``task`` (else every task) and a ``count`` of times each."""
    _known_fields(obj, NextRequest.takes, "a next request")
    task = obj.get("task", "")
    if not isinstance(task, str):
        raise ProtocolError("invalid request: task must be a string")
    if task:
        _name(task, "task")
    count = obj.get("count", NEXT_COUNT_DEFAULT)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= NEXT_COUNT_MAX:
        raise ProtocolError(f"invalid request: count must be a number from 1 to {NEXT_COUNT_MAX}")
    after = obj.get("after", "")
    if not isinstance(after, str) or (after and parse_instant(after) is None):
        raise ProtocolError("invalid request: after must be an RFC 3339 time with an offset")
    return NextRequest(task=task, count=count, after=after)


_BY_OP = {kind.op: kind for kind in CONTROL_REQUESTS}
# The decoding case of each control request type with fields of its own (one without any
# decodes as ``_control_with_no_fields``): each checks its fields after the op and the id.
DECODERS: dict[type[ControlRequest], Callable[[dict[str, Any], str], ControlRequest]] = {
    CancelRequest: _cancel_request,
    ReloadRequest: _reload_request,
    LogsRequest: _logs_request,
    NextRequest: _next_request,
}


def parse_instant(text: str) -> datetime | None:
    """An RFC 3339 time with its offset (``2026-03-28T00:00:00Z``), in UTC; None when it is not
    one. A time without an offset names no instant: refused."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None or len(text) > 64:
        return None
    try:
        return when.astimezone(UTC)
    except OverflowError:
        return None


# -- the answers ---------------------------------------------------------------------------
def _dump_json(body: Any) -> bytes:
    if _dumps is None:
        _import_orjson()
    try:
        return _dumps(body)  # type: ignore[no-any-return]
    except TypeError:
        # What orjson refuses (a lone surrogate in a handler's message, an integer beyond 64
        # bits, a key that is not a string): the standard library's ASCII escapes carry it.
        return json.dumps(body, separators=(",", ":"), default=str).encode("ascii")


def encode_event(event: str, ok: bool, **fields: Any) -> bytes:
    """One answer line from loose fields (a control answer, a refusal): ``answer_body``."""
    return _dump_json(answer_body(event, ok, fields)) + b"\n"


def encode_fields(event: str, fields: Mapping[str, Any]) -> bytes:
    """The wire line of a run event from its constructor's fields (``ok`` among them)."""
    body = {"event": event, **fields}
    if _dumps is not None:
        try:
            return _dumps(body) + b"\n"  # type: ignore[no-any-return]
        except TypeError:
            pass
    return _dump_json(body) + b"\n"


def encode_output(fields: Mapping[str, Any], batch: bool) -> bytes:
    """The wire lines of a run's output lines.

    A client that asked for batches gets one ``output`` line with their ``count`` and ``bytes``,
    then the lines as raw UTF-8 text, so that neither side escapes or parses a line. Any other
    client gets an ``output`` line for each, made at C speed (``json_lines``)."""
    lines = fields["lines"]
    if batch:
        data = ("\n".join(lines) + "\n").encode("utf-8", "replace")
        header = {key: value for key, value in fields.items() if key != "lines"}
        return (
            _dump_json({"event": EVENT_OUTPUT, **header, "bytes": len(data), "count": len(lines)})
            + b"\n"
            + data
        )
    head = b'{"event":"output","ok":true,"id":%b,"stream":%b,"line":' % (
        _dump_json(fields["id"]),
        _dump_json(fields["stream"]),
    )
    at = fields.get("at")
    tail = b"}\n" if at is None else b',"at":%b}\n' % _dump_json(at)
    return json_lines(head, lines, tail)


def rejection(reason: str, code: str) -> bytes:
    """The single ``done`` line of a request that was not accepted."""
    return encode_event(EVENT_DONE, False, reason=reason, code=code)
