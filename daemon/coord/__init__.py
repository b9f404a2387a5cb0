"""Cross-process coordination with ``flock``: overlap guard, slot file, run coalescing.

This is the toolbox behind ``runbroker once``, for users whose own scheduler (host cron, Ofelia,
a CI job) starts runbroker processes, often several at once. Everything here is synchronous and
short-lived-process friendly: plain ``fcntl.flock`` and ``os`` calls, no threads, no event loop.

``OverlapGuard(path)``
    A non-blocking exclusive ``flock`` on a lock file (created if absent, never deleted).
    Acquiring writes the acquisition time (UTC, RFC 3339) into the file, so ``read_holder(path)``
    can tell, without taking the lock, whether someone holds it and for how long. The kernel
    drops the lock when the holder's last descriptor closes, including when it dies, so there is
    no stale-lock state to clean up.

``SlotFile(path)``
    One byte payload shared across processes. ``mutate(fn)`` is read-modify-write under a short
    blocking ``flock`` on the file itself; the file is rewritten in place (never renamed or
    unlinked, which would split lockers across two inodes) and framed with a length and CRC-32,
    so bytes torn by a crash read back as empty.

``Exclusive(directory)``
    Cross-process run coalescing through ``cycle.lock`` (an ``OverlapGuard``) and
    ``cycle.queued`` (a ``SlotFile`` holding a count of queued rerun requests). See its
    docstring for the exact rules and ``Outcome`` for what each call reports.

Files are created mode 0600, opened close-on-exec and without following a symlink at the last
path component. Put them in a directory only the runbroker user can write.

Log lines (stdlib logger ``runbroker.coord``) have one stable shape per decision:
``coord.<decision> dir=<directory> key=value...``, the decision also in ``extra`` as
``coord_decision``. Decisions: the outcomes (``ran``, ``ran-queued``, ``queued``,
``discarded``, ``skipped``, ``gated``, ``none``) once per call, plus ``reprobe`` (a caller
that had queued found the lock free and runs itself), ``orphan-cleared`` (requests found at a
fresh acquisition, covered by the run about to start), ``rerun`` and ``handoff`` (a queued
request is being served), ``retired`` (rerun cap reached, demand left queued), ``deferred``
(gate closed before a rerun) and ``run-failed`` (the job raised; only its type is logged).
Payloads and error messages are never logged.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import logging
import os
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = [
    "LOCK_NAME",
    "QUEUE_NAME",
    "Exclusive",
    "ExclusiveResult",
    "HolderInfo",
    "Outcome",
    "OverlapGuard",
    "SlotFile",
    "read_holder",
]

LOCK_NAME: Final = "cycle.lock"
"""Name of the lock file inside an ``Exclusive`` directory (pass it to ``read_holder``)."""
QUEUE_NAME: Final = "cycle.queued"
"""Name of the queued-request counter (a ``SlotFile``) inside an ``Exclusive`` directory."""

_LOGGER: Final = logging.getLogger("runbroker.coord")
_OPEN_FLAGS: Final = os.O_CLOEXEC | os.O_NOFOLLOW
_FILE_MODE: Final = 0o600
# struct flock for F_OFD_GETLK/F_OFD_SETLK: l_type, l_whence, l_start, l_len, l_pid (native).
_FLOCK_STRUCT: Final = "@hhqqi"
_OFD_SETLK: Final[int | None] = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK: Final[int | None] = getattr(fcntl, "F_OFD_GETLK", None)
_STAMP_MAX_BYTES: Final = 64
_STAMP_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` at offset 0 (retrying short writes) and cut the file to its length."""
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    os.ftruncate(fd, len(data))


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _ofd_lock(fd: int, lock_type: int, command: int) -> int:
    """Run an OFD record-lock command on the whole file; return the resulting ``l_type``."""
    request = struct.pack(_FLOCK_STRUCT, lock_type, os.SEEK_SET, 0, 0, 0)
    reply = fcntl.fcntl(fd, command, request)
    result: int = struct.unpack(_FLOCK_STRUCT, reply)[0]
    return result


# --------------------------------------------------------------------------- overlap guard


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """What ``read_holder`` saw.

    ``held``: True/False when the kernel could be asked (Linux open-file-description locks),
    None when it cannot tell (no OFD locks on this platform; on a filesystem that refuses them,
    such as some network filesystems, a holder may read as False). ``acquired_at`` and
    ``held_for_s``: the current holder's acquisition time and age, None when unknown (no
    holder, or a torn or absent timestamp).
    """

    held: bool | None
    acquired_at: datetime | None
    held_for_s: float | None


class OverlapGuard:
    """A non-blocking exclusive ``flock`` on ``path``; at most one holder across processes.

    ``try_acquire()`` returns False at once when another holder (any process, or another guard
    in this process) has it. Release with ``release()`` or use the guard as a context manager,
    which yields whether it acquired::

        with OverlapGuard(path) as acquired:
            if not acquired:
                return  # another run is in flight

    While held, the file contains ``<RFC 3339 UTC time>\\n`` and a second descriptor carries a
    shared open-file-description lock that ``read_holder`` queries without taking anything, so
    probing never makes a concurrent ``try_acquire`` fail. ``release()`` empties the file and
    closes it; the file itself is never deleted. Descriptors are close-on-exec, so a job's
    child processes do not inherit the lock (a plain ``fork`` without ``exec`` would).
    Not thread-safe: use one guard per thread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._fd: int | None = None
        self._probe_fd: int | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def held(self) -> bool:
        """Whether this guard currently holds the lock."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free; never blocks. Raises ``OSError`` on I/O errors."""
        if self._fd is not None:
            raise RuntimeError(f"{self._path} is already held by this guard")
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, _FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:
            self._probe_fd = self._open_probe()
            # Empty first: a concurrent reader sees nothing or a prefix (unknown), never a mix
            # of the old and the new time.
            os.ftruncate(fd, 0)
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "\n"
            _write_all(fd, stamp.encode("ascii"))
        except BaseException:
            self.release()
            raise
        return True

    def _open_probe(self) -> int | None:
        # A separate open file description: on filesystems that emulate flock with record
        # locks (NFS), a read lock on the flock's own description would downgrade it.
        # The probe only feeds read_holder: failing to set it never fails the acquisition.
        if _OFD_SETLK is None:
            return None
        try:
            probe = os.open(self._path, os.O_RDONLY | _OPEN_FLAGS)
        except OSError:
            return None
        try:
            _ofd_lock(probe, fcntl.F_RDLCK, _OFD_SETLK)
        except OSError:
            os.close(probe)
            return None
        return probe

    def release(self) -> None:
        """Clear the timestamp and close the file, which frees the lock. Idempotent."""
        fd, probe, self._fd, self._probe_fd = self._fd, self._probe_fd, None, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the timestamp is informational; closing still frees the lock
        finally:
            if probe is not None:
                os.close(probe)
            os.close(fd)

    def __enter__(self) -> bool:
        return self.try_acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _parse_stamp(raw: bytes) -> datetime | None:
    if len(raw) > _STAMP_MAX_BYTES or not raw.endswith(b"\n"):
        return None
    try:
        text = raw[:-1].decode("ascii")
    except UnicodeDecodeError:
        return None
    if _STAMP_RE.fullmatch(text) is None:
        return None
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return None


def read_holder(path: str | os.PathLike[str]) -> HolderInfo:
    """Report whether ``path`` is held and since when, without taking or disturbing the lock.

    A missing file reads as not held. A torn, absent or malformed timestamp reads as unknown
    (``acquired_at`` and ``held_for_s`` None). When the kernel says nobody holds the lock, a
    timestamp left by a holder that died is ignored. ``held_for_s`` is wall-clock based and
    never negative.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except FileNotFoundError:
        return HolderInfo(held=False, acquired_at=None, held_for_s=None)
    try:
        held: bool | None = None
        if _OFD_GETLK is not None:
            try:
                held = _ofd_lock(fd, fcntl.F_WRLCK, _OFD_GETLK) != fcntl.F_UNLCK
            except OSError:
                held = None
        if held is False:
            return HolderInfo(held=False, acquired_at=None, held_for_s=None)
        acquired_at = _parse_stamp(os.pread(fd, _STAMP_MAX_BYTES + 1, 0))
    finally:
        os.close(fd)
    if acquired_at is None:
        return HolderInfo(held=held, acquired_at=None, held_for_s=None)
    held_for_s = max(0.0, (datetime.now(UTC) - acquired_at).total_seconds())
    return HolderInfo(held=held, acquired_at=acquired_at, held_for_s=held_for_s)


# --------------------------------------------------------------------------- slot file

_SLOT_MAGIC: Final = b"RBSLOT1 "
_SLOT_HEADER_RE: Final = re.compile(rb"RBSLOT1 ([0-9a-f]{8}) ([0-9a-f]{8})\n")
_SLOT_HEADER_BYTES: Final = len(_SLOT_MAGIC) + 8 + 1 + 8 + 1


def _encode_slot(payload: bytes) -> bytes:
    return b"%s%08x %08x\n%s" % (_SLOT_MAGIC, len(payload), zlib.crc32(payload), payload)


def _decode_slot(raw: bytes) -> bytes:
    """The framed payload, or b"" for an empty, torn or foreign file."""
    header = _SLOT_HEADER_RE.fullmatch(raw[:_SLOT_HEADER_BYTES])
    if header is None:
        return b""
    length, crc = int(header[1], 16), int(header[2], 16)
    payload = raw[_SLOT_HEADER_BYTES : _SLOT_HEADER_BYTES + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        return b""
    return payload


class SlotFile:
    """A single byte payload shared across processes, stored at ``path``.

    ``read()`` takes a shared ``flock`` for the read; ``mutate(fn)`` takes an exclusive one for
    read, ``fn``, write. Both block, so ``fn`` must be quick and must not touch the same slot
    (that would deadlock). The file is created on first ``mutate`` and rewritten in place: it is
    never unlinked or renamed over, because a lock taken on a replaced inode protects nothing.
    Contents are framed (length + CRC-32); torn or foreign bytes read as empty. Writes are not
    fsynced: the slot coordinates live processes and makes no promise across a power loss.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        return self._path

    def read(self) -> bytes:
        """The current payload; b"" when the file is absent, empty or torn."""
        try:
            fd = os.open(self._path, os.O_RDONLY | _OPEN_FLAGS)
        except FileNotFoundError:
            return b""
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return _decode_slot(_read_all(fd))
        finally:
            os.close(fd)

    def mutate(self, fn: Callable[[bytes], bytes]) -> bytes:
        """Replace the payload with ``fn(current)`` atomically; return what ``fn`` saw.

        Nothing is written when ``fn`` returns the payload it was given (torn bytes, which read
        as b"", are left as they are if ``fn`` keeps b""). If ``fn`` raises, nothing is written
        and the exception propagates.
        """
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, _FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = _decode_slot(_read_all(fd))
            new = fn(current)
            if not isinstance(new, bytes):
                raise TypeError(f"mutate fn must return bytes, not {type(new).__name__}")
            if new != current:
                _write_all(fd, _encode_slot(new))
            return current
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- exclusive


class Outcome(enum.StrEnum):
    """What one ``Exclusive.run``/``run_or_skip`` call did with its request."""

    NONE = "none"
    """No decision: an ``OSError`` (lock dir unusable) escaped the call. Appears in the log
    line ``coord.none``; never in a returned result, since the error is raised."""
    RAN = "ran"
    """The lock was free: this call ran the job once (and found no queued rerun)."""
    RAN_QUEUED = "ran-queued"
    """This call ran the job and then at least one rerun for requests queued meanwhile."""
    QUEUED = "queued"
    """A run was in flight: a rerun request was recorded; it will start after this call."""
    DISCARDED = "discarded"
    """A run was in flight and the queue was full: the queued rerun already covers this call."""
    SKIPPED = "skipped"
    """Skip mode and a run was in flight: nothing was run or recorded."""
    GATED = "gated"
    """The lock was free but the gate was closed (shutting down): nothing ran. A request this
    call had already recorded (see ``Exclusive.run``) stays queued."""


@dataclass(frozen=True, slots=True)
class ExclusiveResult:
    """The outcome of one call, how many times it ran the job, and how the last run went.

    ``last_ok`` is None when the call ran nothing. ``last_error`` is the exception the last
    run raised, if it raised (a raising job counts as failed).
    """

    outcome: Outcome
    runs: int = 0
    last_ok: bool | None = None
    last_error: Exception | None = None


@dataclass(slots=True)
class _Tally:
    runs: int = 0
    last_ok: bool | None = None
    last_error: Exception | None = None


_COUNT_RE: Final = re.compile(rb"[0-9]{1,18}")


def _decode_count(payload: bytes) -> int:
    """The queued-request count; anything but plain ASCII digits reads as 0."""
    return int(payload) if _COUNT_RE.fullmatch(payload) else 0


class Exclusive:
    """At most one job run at a time across processes, with coalesced reruns instead of waiters.

    Files in ``directory`` (created 0700 if absent): ``cycle.lock`` is held for a whole run
    (``read_holder(directory / LOCK_NAME)`` shows its age), ``cycle.queued`` counts queued
    rerun requests. A job is ``Callable[[], bool]``: True means it succeeded; returning False
    or raising ``Exception`` means it failed (the exception is kept in the result, never
    re-raised; ``BaseException`` such as ``KeyboardInterrupt`` propagates after the lock is
    released, leaving queued demand for the next acquisition).

    ``run(job)`` (queue mode): lock free -> run the job now, then one rerun per request queued
    meanwhile (``ran``/``ran-queued``); lock busy and fewer than ``queue_capacity`` requests
    queued -> record one and return at once (``queued``); queue full -> return at once
    (``discarded``): a queued rerun starts after this call, which covers it. After recording,
    the caller probes the lock once more: if the holder finished in between, the caller takes
    the lock and runs the job itself, so a holder that simply finished never leaves a request
    behind (only a crash, the rerun cap or the gate leave demand for the next acquisition).

    ``run_or_skip(job)`` (skip mode): as ``run`` but a busy lock returns ``skipped`` and records
    nothing.

    Rules for the holder:

    * Acquiring by a caller clears the counter: nothing was running, so the run about to start
      covers every request recorded so far (demand orphaned by a holder that crashed or
      retired, or this caller's own request). Reruns then take one request each, so a capacity
      of N turns up to N requests made during a run into N reruns.
    * After the last empty check the holder releases the lock and looks once more; a request
      recorded in that window makes it re-acquire (if the lock is still free) and serve it.
    * ``max_reruns`` (default 8) bounds the reruns of one call, re-acquisitions included; then
      the holder retires and leftover demand stays queued for the next acquisition.
    * ``gate()`` is called before every run start. Closed before the first run: ``gated``,
      counter untouched. Closed before a rerun: the holder stops and the demand stays queued.
    * A failed run does not drop queued demand: reruns continue.

    Requests are recorded even while this process's gate is closed; the gate decides what this
    process starts. Each call opens its own descriptors, so one ``Exclusive`` can be shared by
    threads. ``OSError`` from the lock directory propagates (logged as ``coord.none``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        queue_capacity: int = 1,
        gate: Callable[[], bool] | None = None,
        max_reruns: int = 8,
        logger: logging.Logger | None = None,
    ) -> None:
        if queue_capacity < 1:
            raise ValueError(f"queue_capacity must be at least 1, got {queue_capacity}")
        if max_reruns < 0:
            raise ValueError(f"max_reruns must not be negative, got {max_reruns}")
        self._directory = Path(directory)
        self._queue_capacity = queue_capacity
        self._gate = gate
        self._max_reruns = max_reruns
        self._logger = logger if logger is not None else _LOGGER
        self._slot = SlotFile(self._directory / QUEUE_NAME)

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def lock_path(self) -> Path:
        return self._directory / LOCK_NAME

    @property
    def queue_capacity(self) -> int:
        return self._queue_capacity

    @property
    def max_reruns(self) -> int:
        return self._max_reruns

    def pending(self) -> int:
        """The number of queued rerun requests now (it may change the moment it is read)."""
        return _decode_count(self._slot.read())

    def holder(self) -> HolderInfo:
        """``read_holder`` on this directory's lock file."""
        return read_holder(self.lock_path)

    def run(self, job: Callable[[], bool]) -> ExclusiveResult:
        """Queue mode: run now, or record a rerun request, or discard (see the class doc)."""
        return self._guarded(job, skip=False)

    def run_or_skip(self, job: Callable[[], bool]) -> ExclusiveResult:
        """Skip mode: run now, or return ``skipped`` without recording anything."""
        return self._guarded(job, skip=True)

    # -- internals

    def _guarded(self, job: Callable[[], bool], *, skip: bool) -> ExclusiveResult:
        try:
            return self._call(job, skip=skip)
        except OSError as exc:
            code = errno.errorcode.get(exc.errno or 0, "unknown")
            self._log(logging.ERROR, Outcome.NONE, error=type(exc).__name__, errno=code)
            raise

    def _call(self, job: Callable[[], bool], *, skip: bool) -> ExclusiveResult:
        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        guard = OverlapGuard(self.lock_path)
        if guard.try_acquire():
            return self._hold(guard, job, fresh=True)
        if skip:
            self._log(logging.WARNING, Outcome.SKIPPED)
            return ExclusiveResult(Outcome.SKIPPED)
        seen = self._enqueue()
        queued = seen < self._queue_capacity
        if guard.try_acquire():
            # The holder left between our first probe and the record: serve it ourselves.
            self._log(logging.INFO, "reprobe")
            return self._hold(guard, job, fresh=False)
        outcome = Outcome.QUEUED if queued else Outcome.DISCARDED
        self._log(logging.INFO, outcome, pending=seen + 1 if queued else seen)
        return ExclusiveResult(outcome)

    def _enqueue(self) -> int:
        capacity = self._queue_capacity
        return self._mutate_count(lambda n: n + 1 if n < capacity else n)

    def _take_one(self) -> int:
        return self._mutate_count(lambda n: n - 1 if n > 0 else 0)

    def _clear(self) -> int:
        return self._mutate_count(lambda _n: 0)

    def _mutate_count(self, fn: Callable[[int], int]) -> int:
        def apply(payload: bytes) -> bytes:
            before = _decode_count(payload)
            after = fn(before)
            return payload if after == before else str(after).encode("ascii")

        return _decode_count(self._slot.mutate(apply))

    def _gate_open(self) -> bool:
        return self._gate is None or self._gate()

    def _hold(
        self, guard: OverlapGuard, job: Callable[[], bool], *, fresh: bool
    ) -> ExclusiveResult:
        """Serve runs while holding ``guard``; always returns with the lock released.

        ``fresh``: the lock was free at the first probe, so a count found now is orphaned.
        """
        tally = _Tally()
        budget = self._max_reruns
        handoff = False
        while True:
            stop = True  # stop unless the queue was seen empty with budget left
            try:
                if not self._gate_open():
                    if tally.runs == 0:
                        self._log(logging.INFO, Outcome.GATED, pending=self.pending())
                        return ExclusiveResult(Outcome.GATED)
                    self._log_deferred(tally)
                    break
                if handoff:
                    if self._take_one() == 0:
                        break
                    budget -= 1
                    self._log(logging.INFO, "handoff", attempt=self._max_reruns - budget)
                else:
                    orphaned = self._clear()
                    if orphaned and fresh:
                        self._log(logging.INFO, "orphan-cleared", cleared=orphaned)
                self._run_once(job, tally)
                while True:
                    if budget <= 0:
                        if (left := self.pending()) > 0:
                            self._log(logging.WARNING, "retired", pending=left, runs=tally.runs)
                        break
                    if not self._gate_open():
                        self._log_deferred(tally)
                        break
                    seen = self._take_one()
                    if seen == 0:
                        stop = False
                        break
                    budget -= 1
                    self._log(
                        logging.INFO, "rerun", attempt=self._max_reruns - budget, pending=seen - 1
                    )
                    self._run_once(job, tally)
            finally:
                guard.release()
            # A request recorded after our last empty check, before the release, has no holder
            # unless we (or whoever holds the lock now) serve it.
            if stop or self.pending() == 0:
                break
            guard = OverlapGuard(self.lock_path)
            if not guard.try_acquire():
                break  # another holder owns that demand now
            handoff = True
        outcome = Outcome.RAN_QUEUED if tally.runs > 1 else Outcome.RAN
        self._log(logging.INFO, outcome, runs=tally.runs, last_ok=tally.last_ok)
        return ExclusiveResult(outcome, tally.runs, tally.last_ok, tally.last_error)

    def _log_deferred(self, tally: _Tally) -> None:
        if (left := self.pending()) > 0:
            self._log(logging.INFO, "deferred", pending=left, runs=tally.runs)

    def _run_once(self, job: Callable[[], bool], tally: _Tally) -> None:
        try:
            ok, error = bool(job()), None
        except Exception as exc:
            ok, error = False, exc
            self._log(logging.WARNING, "run-failed", error=type(exc).__name__)
        tally.runs += 1
        tally.last_ok = ok
        tally.last_error = error

    def _log(self, level: int, decision: str, **fields: object) -> None:
        pairs = " ".join(f"{key}={value}" for key, value in fields.items())
        self._logger.log(
            level,
            "coord.%s dir=%s%s",
            str(decision),
            self._directory,
            f" {pairs}" if pairs else "",
            extra={"coord_decision": str(decision), "coord_dir": str(self._directory)},
        )
