"""The JSON-lines wire format, and nothing else knows it.

One request per connection: one JSON object terminated by ``\\n``, at most 8 MiB, sent within
30 s. A submit request is the payload itself (``{}`` runs ``default``; fields ``task``,
``args``, ``env``); control requests carry ``op``: ``status``, ``cancel`` (with ``id``),
``health``. Answers are JSON objects, one per line, with at least ``event`` and ``ok``.

This module imports only the standard library's ``json``: the thin client loads it on every
cold ``docker exec``.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # the thin client must not pay for importing typing
if TYPE_CHECKING:
    from typing import Any

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


class SubmitRequest:
    """Run ``task`` with ``args`` appended and ``env`` set (both subject to the task's policy).

    A plain immutable value class: ``dataclasses`` and ``typing.NamedTuple`` cost a cold client
    more than everything else it imports.
    """

    __slots__ = ("args", "env", "task")

    def __init__(
        self,
        task: str = "default",
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.task = task
        self.args = tuple(args)
        self.env = dict(env) if env else {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubmitRequest) and (self.task, self.args, self.env) == (
            other.task,
            other.args,
            other.env,
        )

    def __hash__(self) -> int:
        return hash((self.task, self.args, tuple(sorted(self.env.items()))))

    def __repr__(self) -> str:
        return f"SubmitRequest(task={self.task!r}, args={self.args!r}, env=<{len(self.env)}>)"


class ControlRequest:
    """``op`` is ``status``, ``health`` or ``cancel`` (which names a run ``id``)."""

    __slots__ = ("id", "op")

    def __init__(self, op: str, id: str = "") -> None:
        self.op = op
        self.id = id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ControlRequest) and (self.op, self.id) == (other.op, other.id)

    def __hash__(self) -> int:
        return hash((self.op, self.id))

    def __repr__(self) -> str:
        return f"ControlRequest(op={self.op!r}, id={self.id!r})"


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
    # ASCII escapes keep any text encodable, lone surrogates from a handler's message included.
    return json.dumps(body, separators=(",", ":"), default=str).encode("ascii") + b"\n"


def decode_event(line: bytes) -> dict[str, Any] | None:
    """An answer line as a dict, or None when it is not a JSON object with an ``event``."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj
