"""The daemon's side of ``runbroker logs``: a run's lines (which run: ``logs_select``), from the
journal's buffer and then, when following, live, paced by how fast the client reads.

A reader keeps only its position in the run's ``RunLog``: its lines are encoded as the client
takes them, at most ``FILL_BYTES`` ahead (``AnswerStream.flush``), so a slow reader holds no
copy and never slows the job; what the buffer dropped before the reader got there is counted
and said in the ``done`` line's ``dropped_lines`` (without follow, a run not ended: the
``end`` line's). A run still queued is waited for (as its listener) and followed from its
start; a task followed before its first run waits for one to be queued (the queue's
``on_submit``), as long as the client stays.
"""

from __future__ import annotations

import itertools
from typing import Any

from daemon.core.journal import FollowerHold, Journal, RunLog
from daemon.core.runqueue import Event, Run, RunQueue
from daemon.core.tasks import TaskRegistry
from daemon.server.answers import AnswerStream
from daemon.server.logs_select import FirstRun, select
from daemon.server.segments import SEGMENT_LINES, SegmentCache
from daemon.wire.codec import encode_event, encode_fields, encode_output
from daemon.wire.logs_answers import (
    STATE_DONE,
    STATE_QUEUED,
    STATE_RUNNING,
    logged_lines,
    logs_end,
    logs_header,
    logs_refusal,
    logs_waiting,
    runs_answer,
)
from daemon.wire.protocol import (
    EVENT_DONE,
    EVENT_STARTED,
    LogsRequest,
)


class LogReader:
    """One client's reading of one run's lines (a ``LineSource`` of its connection)."""

    def __init__(
        self, stream: AnswerStream, journal: Journal, follow: bool, segments: SegmentCache
    ) -> None:
        self.stream = stream
        self.segments: SegmentCache | None = segments  # None once closed
        segments.opened()
        self.hold = FollowerHold()  # the run's output, held back while this reader is behind
        self.journal = journal
        self.follow = follow
        self.log: RunLog | None = None
        self.queued: Run | None = None  # a run waited for until it starts
        self.first_of: tuple[RunQueue, str] | None = None  # a task waited for ("": any)
        self.seq = 0  # the next line to send
        self.stop_seq: int | None = None  # without follow: the lines there were at the request
        self.missed = 0  # lines the buffer dropped before this reader sent them

    def read(self, log: RunLog) -> None:
        self.log = log
        self.seq = log.first_seq
        if not self.follow:
            self.stop_seq = log.end_seq
        elif log.result is None:
            self.hold.seq = self.seq
            log.follow(self.stream.wake, self.hold)
        self.stream.wake()

    def wait_for(self, run: Run) -> None:
        self.queued = run
        run.subscribe(self.on_run_event)

    def wait_for_first(self, queue: RunQueue, task: str) -> None:
        self.first_of = (queue, task)
        queue.on_submit(self.on_submit)

    def on_submit(self, run: Run) -> None:
        """A run was queued: the first one of the task waited for is followed from its start."""
        if self.first_of is None:
            return
        queue, task = self.first_of
        if task and run.request.task != task:
            return
        queue.off_submit(self.on_submit)
        self.first_of = None
        self.stream.send(encode_event(**_queued_header(run)))
        self.wait_for(run)

    def on_run_event(self, run: Run, event: Event) -> None:
        """The queued run's listener: it started (read its log) or ended without starting."""
        if event.kind == EVENT_STARTED:
            self.queued = None
            run.unsubscribe(self.on_run_event)
            log = self.journal.find(run.id)
            if log is not None:
                self.read(log)
        elif event.kind == EVENT_DONE:
            self.queued = None
            self.stream.send(encode_fields(EVENT_DONE, event.fields))
            self.stream.finish()

    def fill(self, stream: AnswerStream, budget_bytes: int) -> bool:
        log = self.log
        if log is None:
            return False
        seq, stop = self.seq, self.stop_seq
        first = log.first_seq if stop is None else min(log.first_seq, stop)
        if seq < first:  # dropped before this reader got there (not past where it stops)
            self.missed += first - seq
            seq = first
        end = log.end_seq if stop is None else min(stop, log.end_seq)
        chunks: list[bytes] = []
        run_id, sent, batch = log.run_id, 0, stream.batch
        segments = self.segments
        assert segments is not None
        while seq < end and sent < budget_bytes:
            # Cut on the grid (and at the marks): readers at different places meet on it, and
            # then send the same segments, encoded once (``SegmentCache``).
            most = SEGMENT_LINES - seq % SEGMENT_LINES
            stream_name, at, lines = log.segment(seq, end, most)
            key = (run_id, seq, len(lines), batch)
            data = segments.get(key)
            if data is None:
                data = encode_output(logged_lines(run_id, stream_name, lines, at), batch)
                segments.keep(key, data)
            while sent + len(data) > budget_bytes and len(lines) > 1:  # at most a line over
                lines = lines[: max(1, len(lines) * (budget_bytes - sent) // len(data))]
                data = encode_output(logged_lines(run_id, stream_name, lines, at), batch)
            chunks.append(data)
            sent += len(data)
            seq += len(lines)
        self.seq = seq
        stream.queue_lines(chunks, sent)
        hold = self.hold
        hold.seq = seq
        if (hold.holding is not None or hold.let_go) and (end - seq) * 4 <= log.line_count:
            hold.caught_up()  # within a quarter of what is kept: the run may go on
        if seq < end:
            return True
        if log.result is not None:
            last = self._done_line(log)
        elif stop is not None:  # not following: what was there has been sent
            last = encode_event(**logs_end(run_id, self.missed))
        else:
            return False
        stream.queue_lines([last], len(last))
        stream.last_line_queued()
        return False

    def _done_line(self, log: RunLog) -> bytes:
        result = log.result
        assert result is not None
        fields = result.done_fields(log.run_id)
        if self.missed:
            fields["dropped_lines"] = self.missed
        return encode_fields(EVENT_DONE, fields)

    def close(self) -> None:
        if self.segments is not None:
            self.segments.closed()
            self.segments = None
        self.hold.release()
        if self.log is not None:
            self.log.unfollow(self.stream.wake, self.hold)
        if self.queued is not None:
            self.queued.unsubscribe(self.on_run_event)
            self.queued = None
        if self.first_of is not None:
            self.first_of[0].off_submit(self.on_submit)
            self.first_of = None


def _queued_header(run: Run) -> dict[str, Any]:
    request = run.request
    return logs_header(run.id, request.task, request.trigger, STATE_QUEUED, None, 0)


def _summary(log: RunLog) -> dict[str, Any]:
    """A finished run as ``runs`` lists it."""
    result = log.result
    assert result is not None
    return {
        "id": log.run_id,
        "task": log.task,
        "trigger": log.trigger,
        "outcome": result.outcome,
        "reason": result.reason,
        "code": result.wire_code,
        "exit_code": result.exit_code,
        "started_at": log.started_at,
        "duration_ms": result.duration_ms,
        "lines": log.end_seq,
        "kept_lines": log.line_count,
    }


def open_logs(
    stream: AnswerStream,
    journal: Journal,
    queue: RunQueue,
    tasks: TaskRegistry,
    request: LogsRequest,
    segments: SegmentCache,
) -> LogReader | None:
    """Answer a ``logs`` request on ``stream``: its header, then the reader that sends the
    lines; None (and the refusal sent) when there is no such run, or for a list of runs."""
    if request.runs:
        listed = itertools.islice(journal.history(), request.runs)
        stream.send(encode_event(**runs_answer([_summary(log) for log in listed])))
        stream.finish()
        return None
    chosen = select(journal, queue, tasks, request)
    if isinstance(chosen, str):
        stream.send(encode_event(**logs_refusal(chosen)))
        stream.finish()
        return None
    reader = LogReader(stream, journal, request.follow, segments)
    if isinstance(chosen, FirstRun):
        stream.send(encode_event(**logs_waiting(chosen.task)))
        reader.wait_for_first(queue, chosen.task)
        return reader
    if isinstance(chosen, Run):
        stream.send(encode_event(**_queued_header(chosen)))
        if request.follow:
            reader.wait_for(chosen)
        else:
            stream.send(encode_event(**logs_end(chosen.id, 0)))
            stream.finish()
        return reader
    state = STATE_RUNNING if chosen.result is None else STATE_DONE
    header = logs_header(
        chosen.run_id, chosen.task, chosen.trigger, state, chosen.started_at, chosen.first_seq
    )
    stream.send(encode_event(**header))
    reader.read(chosen)
    return reader
