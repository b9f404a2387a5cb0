"""The JSON-lines wire format, and nothing else knows it.

One request per connection: one JSON object terminated by ``\\n``, at most 8 MiB, sent within
30 s. A submit request is the payload itself (``{}`` runs ``default``; fields ``task``,
``args``, ``env``); control requests carry ``op``: ``status``, ``cancel`` (with ``id``),
``health``. Answers are JSON objects, one per line, with at least ``event`` and ``ok``.

This module imports only the standard library's ``json`` and ``typing`` (not ``dataclasses``,
which costs a cold process more than everything else here): the thin client loads it on every
cold ``docker exec``.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

MAX_REQUEST_BYTES = 8 * 1024 * 1024
REQUEST_DEADLINE_S = 30.0
MAX_ARGS = 256
MAX_ENV = 256

REASON_UNDECODABLE = "undecodable request"
REASON_TOO_LARGE = "request too large"
REASON_TOO_SLOW = "request not received in time"
REASON_FORBIDDEN = "permission denied"
CONTROL_OPS = ("status", "cancel", "health")


class ProtocolError(ValueError):
    """A request that cannot be served; ``reason`` is what the client is told."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_NO_ENV: dict[str, str] = {}


class SubmitRequest(NamedTuple):
    task: str = "default"
    args: tuple[str, ...] = ()
    env: dict[str, str] = _NO_ENV  # never mutated


class ControlRequest(NamedTuple):
    op: str
    id: str = ""


Request = SubmitRequest | ControlRequest


def _string_list(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ProtocolError(f"invalid request: {name} must be a list of strings")
    if len(value) > MAX_ARGS:
        raise ProtocolError(f"invalid request: at most {MAX_ARGS} {name}")
    return tuple(value)


def _string_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ProtocolError(f"invalid request: {name} must be an object of strings")
    if len(value) > MAX_ENV:
        raise ProtocolError(f"invalid request: at most {MAX_ENV} {name} entries")
    return dict(value)


def decode_request(line: bytes) -> Request:
    """Parse one request line (without or with its newline); raise ``ProtocolError``."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ProtocolError(REASON_TOO_LARGE)
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError(REASON_UNDECODABLE) from None
    if not isinstance(obj, dict):
        raise ProtocolError(REASON_UNDECODABLE)
    op = obj.get("op")
    if op is not None:
        if op not in CONTROL_OPS:
            raise ProtocolError(f"unknown op {op!r}" if isinstance(op, str) else "invalid op")
        run_id = obj.get("id", "")
        if not isinstance(run_id, str):
            raise ProtocolError("invalid request: id must be a string")
        if op == "cancel" and not run_id:
            raise ProtocolError("cancel needs an id")
        return ControlRequest(op=op, id=run_id)
    task = obj.get("task", "default")
    if not isinstance(task, str) or not task:
        raise ProtocolError("invalid request: task must be a non-empty string")
    return SubmitRequest(
        task=task,
        args=_string_list(obj.get("args", []), "args"),
        env=_string_map(obj.get("env", {}), "env"),
    )


def encode_request(request: Request) -> bytes:
    body: dict[str, Any]
    if isinstance(request, ControlRequest):
        body = {"op": request.op}
        if request.id:
            body["id"] = request.id
    else:
        body = {}
        if request.task != "default":
            body["task"] = request.task
        if request.args:
            body["args"] = list(request.args)
        if request.env:
            body["env"] = request.env
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def encode_event(event: str, ok: bool, **fields: Any) -> bytes:
    """One answer line. Empty ``reason`` and zero ``duration_ms`` are omitted, as the Go
    framing does."""
    body: dict[str, Any] = {"event": event, "ok": ok}
    for key, value in fields.items():
        if key == "reason" and not value:
            continue
        if key == "duration_ms" and not value:
            continue
        body[key] = value
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str).encode() + b"\n"


def decode_event(line: bytes) -> dict[str, Any] | None:
    """An answer line as a dict, or None when it is not a JSON object with an ``event``."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj
