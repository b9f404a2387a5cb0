"""The JSON-lines wire format: the requests, the event kinds and the answers' constructors.

Only the standard library's ``json`` at import, because the thin client loads it on every cold
``docker exec``. The daemon's side of the format, with orjson, is ``codec``.
"""

from __future__ import annotations

import json

from daemon.wire.reasons import CODE_BAD_REQUEST, CODE_OVERDUE

TYPE_CHECKING = False  # the thin client must not pay for importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ClassVar

DEFAULT_SOCKET = "/run/runbroker/runbroker.sock"  # RUNBROKER_SOCKET's default: daemon and client
MAX_REQUEST_BYTES = 8 * 1024 * 1024
REQUEST_DEADLINE_S = 30.0
MAX_ARGS = 256
MAX_ENV = 256
MAX_NAME_CHARS = 256  # a task name, an op, a cancel id, an env name
MAX_PATH_CHARS = 4096  # a file's name (``reload --dry-run --file``), as PATH_MAX
ECHO_CHARS = 80  # how much of a client's own text a reason repeats (and a log line shows)

# The fields a run request takes (a control request's: its type's ``takes``). Any other is
# refused, naming it (a misspelt "tsak" or "agrs" would otherwise run the default task, or the
# task without its args). ``batch`` asks for output frames in batches. The Go client's
# ``trigger.Submit`` sends ``{}`` or ``{"task": ...}``.
SUBMIT_FIELDS = frozenset({"task", "args", "env", "batch"})
NEXT_COUNT_DEFAULT = 5  # ``next``: the planned times of each task, unless told
NEXT_COUNT_MAX = 100


class ProtocolError(ValueError):
    """A request that cannot be served.

    ``reason`` is what the client is told, ``code`` its code (``reasons``)."""

    def __init__(self, reason: str, code: str = CODE_BAD_REQUEST) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class SubmitRequest:
    """Run ``task`` with ``args`` appended and ``env`` set (both subject to the task's policy).

    A plain class, because ``dataclasses`` and ``typing.NamedTuple`` cost a cold client more than
    all else it imports. ``batch`` frames the answer and does not change what runs, so equality
    leaves it out."""

    __slots__ = ("args", "batch", "env", "task")

    def __init__(
        self,
        task: str = "default",
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        batch: bool = False,
    ) -> None:
        self.task = task
        self.args = tuple(args)
        self.env = dict(env) if env else {}
        self.batch = batch

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


class _Record:
    """Equality, hash and repr from a request's ``__slots__`` (a plain class: see
    ``SubmitRequest``). ``batch`` frames the answer and does not change what is asked, so
    equality leaves it out."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = type(self).__slots__
        return names

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._names() if name != "batch")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Record) and type(other) is type(self) and self._key() == other._key()
        )

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def __repr__(self) -> str:
        shown = (
            f"{name}=<{len(value)} bytes>" if isinstance(value, bytes) else f"{name}={value!r}"
            for name, value in ((name, getattr(self, name)) for name in self._names())
        )
        return f"{type(self).__name__}({', '.join(shown)})"


def _given(**fields: object) -> dict[str, object]:
    """The fields worth sending: a false, zero or empty one is the default the daemon assumes."""
    return {key: value for key, value in fields.items() if value}


class _Control(_Record):
    """A control request: ``op`` names it on the wire and ``takes`` are the fields it takes
    (``id`` among them even where it names no run: taken and ignored)."""

    __slots__ = ()
    op: ClassVar[str]
    takes: ClassVar[frozenset[str]] = frozenset({"op", "id"})

    def wire_fields(self) -> dict[str, object]:
        """Its fields as the client sends them, ``op`` aside."""
        return {}


class StatusRequest(_Control):
    """``status``: the queue, the running run, the recent results and the tasks."""

    __slots__ = ()
    op = "status"


class HealthRequest(_Control):
    """``health``: liveness, readiness and their warnings."""

    __slots__ = ()
    op = "health"


class CancelRequest(_Control):
    """``cancel`` run ``id``: a queued run is dropped, a running one asked to stop."""

    __slots__ = ("id",)
    op = "cancel"

    def __init__(self, id: str) -> None:
        self.id = id

    def wire_fields(self) -> dict[str, object]:
        return _given(id=self.id)


class ReloadRequest(_Control):
    """``reload`` the tasks file. ``dry_run`` asks for the plan and changes nothing; with
    ``content`` (a candidate file's bytes, read by the client, base64 on the wire) and its name
    ``file``, of that file instead of the tasks file."""

    __slots__ = ("content", "dry_run", "file")
    op = "reload"
    takes = frozenset({"op", "id", "dry_run", "file", "content"})

    def __init__(self, dry_run: bool = False, file: str = "", content: bytes | None = None) -> None:
        self.dry_run = dry_run
        self.file = file
        self.content = content

    def wire_fields(self) -> dict[str, object]:
        fields = _given(dry_run=self.dry_run)
        if self.content is not None:
            import base64  # only for ``reload --dry-run --file``: not on a trigger's path

            fields["file"] = self.file
            fields["content"] = base64.b64encode(self.content).decode("ascii")
        return fields


class LogsRequest(_Control):
    """``logs`` of a run ``id``, a ``task`` or neither (the latest run), ``follow`` until the
    run ends; ``runs``: a list of the last finished runs instead. ``batch`` as a
    ``SubmitRequest``'s. Its answer streams from the connection, not from the broker."""

    __slots__ = ("batch", "follow", "id", "runs", "task")
    op = "logs"
    takes = frozenset({"op", "id", "task", "follow", "runs", "batch"})

    def __init__(
        self, id: str = "", task: str = "", follow: bool = False, runs: int = 0, batch: bool = False
    ) -> None:
        self.id = id
        self.task = task
        self.follow = follow
        self.runs = runs
        self.batch = batch

    def wire_fields(self) -> dict[str, object]:
        return _given(
            id=self.id, task=self.task, follow=self.follow, runs=self.runs, batch=self.batch
        )


class NextRequest(_Control):
    """``next``: of a ``task`` or every one, ``count`` planned times each, the first ones
    ``after`` an RFC 3339 instant (empty: now)."""

    __slots__ = ("after", "count", "task")
    op = "next"
    takes = frozenset({"op", "task", "count", "after"})

    def __init__(self, task: str = "", count: int = NEXT_COUNT_DEFAULT, after: str = "") -> None:
        self.task = task
        self.count = count
        self.after = after

    def wire_fields(self) -> dict[str, object]:
        return _given(task=self.task, count=self.count, after=self.after)


# Answered by the broker in one line (``broker.operations``); ``logs`` streams its answer.
AnsweredRequest = StatusRequest | HealthRequest | CancelRequest | ReloadRequest | NextRequest
ControlRequest = AnsweredRequest | LogsRequest
CONTROL_REQUESTS: tuple[type[ControlRequest], ...] = ControlRequest.__args__
Request = SubmitRequest | ControlRequest


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as a reason or a log line may repeat it: at most ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def encode_request(request: Request) -> bytes:
    body: dict[str, Any]
    if isinstance(request, SubmitRequest):
        body = {}
        if request.task != "default":
            body["task"] = request.task
        if request.args:
            body["args"] = list(request.args)
        if request.env:
            body["env"] = request.env
        if request.batch:
            body["batch"] = True
    else:
        body = {"op": request.op, **request.wire_fields()}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


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


def output_lines_event(run_id: str, stream: str, lines: list[str]) -> dict[str, Any]:
    """The lines of one read of a run's pipe: an ``output`` event a line on the wire, or one
    batch of them for a client that asked for batches (``batch``, ``codec.encode_output``)."""
    return {"ok": True, "id": run_id, "stream": stream, "lines": lines}


def overdue_event(run_id: str, reason: str) -> dict[str, Any]:
    return {"ok": True, "id": run_id, "reason": reason, "code": CODE_OVERDUE}


def done_event(
    run_id: str,
    ok: bool,
    reason: str = "",
    duration_ms: int = 0,
    exit_code: int | None = None,
    output: dict[str, Any] | None = None,
    code: str = "",
) -> dict[str, Any]:
    """A run's result: an empty ``reason`` or ``code`` and a zero ``duration_ms`` are left out
    (the field rule of ``answer_body``, written out: this is built for every run a client
    watches)."""
    fields: dict[str, Any] = {"ok": ok, "id": run_id}
    if reason:
        fields["reason"] = reason
    if code:
        fields["code"] = code
    if duration_ms:
        fields["duration_ms"] = duration_ms
    if exit_code is not None:
        fields["exit_code"] = exit_code
    if output is not None:
        fields["output"] = output
    return fields


_LEFT_OUT_WHEN_EMPTY = ("reason", "code", "duration_ms")


def answer_body(event: str, ok: bool, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An answer line's body: ``event``, ``ok``, then ``fields`` by the field rule of every answer.

    An empty ``reason`` (and ``code``) and a zero ``duration_ms`` are left out, as the Go framing
    has it. ``done_event`` applies the same rule inline, because it runs for every watched run."""
    body: dict[str, Any] = {"event": event, "ok": ok}
    for key, value in fields.items():
        if key in _LEFT_OUT_WHEN_EMPTY and not value:
            continue
        body[key] = value
    return body


def decode_event(line: bytes) -> dict[str, Any] | None:
    """An answer line as a dict, or None when it is not a JSON object with an ``event``."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj
