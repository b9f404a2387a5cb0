"""The JSON-lines wire format, and nothing else knows it.

One request per connection: one JSON object terminated by ``\\n``, at most 8 MiB, sent within
30 s. A submit request is the payload itself (``{}`` runs ``default``; fields ``task``,
``args``, ``env``); control requests carry ``op``: ``status``, ``cancel`` (with ``id``),
``health``. Answers are JSON objects, one per line, with at least ``event`` and ``ok``.

At import this module loads only the standard library's ``json``: the thin client loads it on
every cold ``docker exec``. The daemon's side (``decode_request``, ``encode_event`` and the event
constructors) uses orjson, loaded on first use: it encodes an event line in about a tenth of the
time ``json.dumps`` takes, and its decoder refuses what a request must not carry (lone
surrogates, nesting deeper than 1,024).

The vocabulary of the answers lives here too: the event kinds, the reasons a client is told, the
rule that an empty ``reason`` and a zero ``duration_ms`` are omitted, and the constructors the
server, the queue and the executor use (``queued_event`` ... ``done_event``).
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # the thin client must not pay for importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_REQUEST_BYTES = 8 * 1024 * 1024
REQUEST_DEADLINE_S = 30.0
MAX_ARGS = 256
MAX_ENV = 256
MAX_NAME_CHARS = 256  # a task name, an op, a cancel id, an env name
ECHO_CHARS = 80  # how much of a client's own text a reason repeats (and a log line shows)

REASON_UNDECODABLE = "undecodable request"
REASON_TOO_LARGE = "request too large"
REASON_TOO_SLOW = "request not received in time"
REASON_FORBIDDEN = "permission denied"
REASON_BUSY = "server busy: too many unfinished requests"
REASON_FULL = "run queue is full"
REASON_CLOSED = "scheduler is shutting down"
REASON_SHUTDOWN_CANCEL = "cancelled: scheduler shutting down"
REASON_USER_CANCEL = "cancelled by request"
# A client may try again later (exit 75): the daemon is busy, full or stopping.
TEMPFAIL_REASONS = frozenset({REASON_FULL, REASON_CLOSED, REASON_BUSY})
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


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as a reason or a log line may repeat it: at most ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


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


def _load_json(line: bytes) -> Any:
    global _loads
    if _loads is None:
        import orjson

        _loads = orjson.loads
    return _loads(line)


def decode_request(line: bytes) -> Request:
    """Parse one request line (without or with its newline); raise ``ProtocolError``."""
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
        if op not in CONTROL_OPS:
            raise ProtocolError(f"unknown op {clip(op)!r}" if isinstance(op, str) else "invalid op")
        run_id = obj.get("id", "")
        if not isinstance(run_id, str):
            raise ProtocolError("invalid request: id must be a string")
        if op == "cancel":
            if not run_id:
                raise ProtocolError("cancel needs an id")
            _name(run_id, "id")
        return ControlRequest(op=op, id=run_id)
    task = _name(obj["task"], "task") if "task" in obj else "default"
    args = obj.get("args")
    env = obj.get("env")
    return SubmitRequest(
        task,
        _string_list(args, "args") if args is not None else (),
        _string_map(env, "env") if env is not None else None,
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


_dumps: Any = None


def _dump_json(body: dict[str, Any]) -> bytes:
    global _dumps
    if _dumps is None:
        import orjson

        _dumps = orjson.dumps
    try:
        return _dumps(body)  # type: ignore[no-any-return]
    except TypeError:
        # What orjson refuses (a lone surrogate in a handler's message, an integer beyond 64
        # bits, a key that is not a string): the standard library's ASCII escapes carry it.
        return json.dumps(body, separators=(",", ":"), default=str).encode("ascii")


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
    return _dump_json(body) + b"\n"


# -- the events of a run, as the server sends them (a field dict each: ``ok`` among them) ----
EVENT_QUEUED = "queued"
EVENT_STARTED = "started"
EVENT_OUTPUT = "output"
EVENT_OVERDUE = "overdue"
EVENT_DONE = "done"


def queued_event(run_id: str, position: int, task: str) -> dict[str, Any]:
    return {"ok": True, "id": run_id, "position": position, "task": task}


def started_event(run_id: str, task: str) -> dict[str, Any]:
    return {"ok": True, "id": run_id, "task": task}


def output_event(run_id: str, stream: str, line: str) -> dict[str, Any]:
    return {"ok": True, "id": run_id, "stream": stream, "line": line}


def overdue_event(run_id: str, reason: str) -> dict[str, Any]:
    return {"ok": True, "id": run_id, "reason": reason}


def done_event(
    run_id: str,
    ok: bool,
    reason: str = "",
    duration_ms: int = 0,
    exit_code: int | None = None,
    output: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A run's result: an empty ``reason`` and a zero ``duration_ms`` are left out."""
    fields: dict[str, Any] = {"ok": ok, "id": run_id}
    if reason:
        fields["reason"] = reason
    if duration_ms:
        fields["duration_ms"] = duration_ms
    if exit_code is not None:
        fields["exit_code"] = exit_code
    if output is not None:
        fields["output"] = output
    return fields


def encode_fields(event: str, fields: Mapping[str, Any]) -> bytes:
    """The wire line of a run event from its constructor's fields (``ok`` among them)."""
    body = {"event": event, **fields}
    if _dumps is not None:
        try:
            return _dumps(body) + b"\n"  # type: ignore[no-any-return]
        except TypeError:
            pass
    return _dump_json(body) + b"\n"


# -- the answers of control requests (a field dict each, ``event`` among them) ---------------
EVENT_CANCEL = "cancel"
EVENT_HEALTH = "health"
EVENT_STATUS = "status"
CANCEL_QUEUED = "queued"  # the run left the queue with a cancelled result
CANCEL_RUNNING = "running"  # the running run was asked to stop; its result says when it did


def cancel_answer(run_id: str, state: str, detail: str = "") -> dict[str, Any]:
    answer: dict[str, Any] = {"event": EVENT_CANCEL, "ok": True, "id": run_id, "state": state}
    if detail:
        answer["detail"] = detail
    return answer


def cancel_refusal(run_id: str) -> dict[str, Any]:
    reason = f"no queued or running run {clip(run_id)!r}"
    return {"event": EVENT_CANCEL, "ok": False, "id": run_id, "reason": reason}


def health_answer(problem: str | None, warnings: list[str] | None = None) -> dict[str, Any]:
    """``ok`` unless there is a problem, which is the reason (omitted when empty); what is
    wrong without making the daemon unhealthy goes in ``warnings`` (omitted when none)."""
    answer: dict[str, Any] = {"event": EVENT_HEALTH, "ok": problem is None, "reason": problem or ""}
    if warnings:
        answer["warnings"] = warnings
    return answer


def rejection(reason: str) -> bytes:
    """The single ``done`` line of a request that was not accepted."""
    return encode_event(EVENT_DONE, False, reason=reason)


def decode_event(line: bytes) -> dict[str, Any] | None:
    """An answer line as a dict, or None when it is not a JSON object with an ``event``."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj
