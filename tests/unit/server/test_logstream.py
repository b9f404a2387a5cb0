"""The ``logs`` op on the wire: decoding, and a connection streaming a run's buffered lines,
then its live ones, paced by its reader: a reader that does not read holds no copy, misses
lines (counted) while the run goes on, and gets the newest ones and the result."""

from __future__ import annotations

import pytest

from daemon.core.journal import Journal
from daemon.core.runqueue import RunQueue, RunRequest, RunResult
from daemon.server.answers import FILL_BYTES
from tests.unit.server.logs_serving import (
    FAILED,
    connect_reader,
    logs_server,
    loop_turns,
    read_until_closed,
    run_to_a_failed_end,
    running_log,
)


async def test_following_streams_the_buffer_then_live_lines_then_the_result() -> None:
    journal = Journal()
    log = running_log(journal)
    log.add("stdout", "one")
    log.add("stderr", "two")
    transport = connect_reader(
        logs_server(journal), b'{"op":"logs","task":"chatty","follow":true}\n'
    )
    await loop_turns()
    transport.read_all()
    log.add("stdout", "three")
    await loop_turns()
    transport.read_all()
    assert not transport.closed  # still following
    journal.end(log, FAILED)
    await loop_turns()
    transport.read_all()
    header, *lines, done = transport.answer()
    assert header == {
        "event": "logs",
        "ok": True,
        "id": log.run_id,
        "task": "chatty",
        "trigger": "tick",
        "state": "running",
        "started_at": log.started_at,
        "dropped_lines": 0,
    }
    assert [(e["event"], e["stream"], e["line"]) for e in lines] == [
        ("output", "stdout", "one"),
        ("output", "stderr", "two"),
        ("output", "stdout", "three"),
    ]
    assert all(isinstance(e["at"], float) for e in lines)
    assert done == {
        "event": "done",
        "ok": False,
        "id": log.run_id,
        "reason": "exit status 3",
        "code": "failed",
        "duration_ms": 12,
        "exit_code": 3,
    }
    assert transport.closed
    assert log.followers == []


async def test_without_follow_the_buffered_lines_then_the_end() -> None:
    journal = Journal()
    log = running_log(journal)
    log.add("stdout", "one")
    transport = connect_reader(
        logs_server(journal), b'{"op":"logs","id":"%s"}\n' % log.run_id.encode()
    )
    await loop_turns()
    log.add("stdout", "later")  # after the request: not waited for
    await loop_turns()
    transport.read_all()
    header, line, end = transport.answer()
    assert (header["state"], line["line"]) == ("running", "one")
    assert end == {"event": "end", "ok": True, "id": log.run_id, "dropped_lines": 0}
    assert transport.closed
    assert log.followers == []


async def test_an_unknown_run_or_task_is_refused_with_a_reason() -> None:
    server = logs_server(Journal())
    for request, reason in [
        (b'{"op":"logs","id":"r1234567-1"}', "no run 'r1234567-1'"),
        (b'{"op":"logs","task":"nope"}', "unknown task 'nope': this container defines chatty"),
        (
            b'{"op":"logs","task":"rabc-1"}',
            "unknown task 'rabc-1' (nor a run id, which is r, at least seven hex digits, -, "
            "a number): this container defines chatty",
        ),
        (b'{"op":"logs","task":"chatty"}', "no run of task 'chatty' yet"),
        (b'{"op":"logs"}', "no run yet"),
    ]:
        transport = connect_reader(server, request + b"\n")
        await loop_turns()
        transport.read_all()
        (answer,) = transport.answer()
        assert answer["event"] == "logs"
        assert answer["ok"] is False
        assert answer["reason"].startswith(reason)
        assert transport.closed


async def test_a_queued_run_is_followed_from_its_start() -> None:
    journal = Journal()
    queue = RunQueue(4)
    queue.submit(RunRequest(task="chatty"))  # the one that runs first
    queued = queue.submit(RunRequest(task="chatty"))
    transport = connect_reader(
        logs_server(journal, queue), b'{"op":"logs","id":"%s","follow":true}\n' % queued.id.encode()
    )
    await loop_turns()
    run_to_a_failed_end(journal, queued, "hello")
    await loop_turns()
    transport.read_all()
    header, line, done = transport.answer()
    assert (header["state"], line["line"], done["exit_code"]) == ("queued", "hello", 3)
    assert transport.closed
    assert not queued.listened


async def test_a_reader_that_does_not_read_holds_no_copy_and_misses_lines_counted() -> None:
    journal = Journal(run_bytes_max=1024 * 1024)
    log = running_log(journal)
    early, total = 20_000, 40_000
    for number in range(early):  # more than the buffer keeps, and than a reader is sent ahead
        log.add("stdout", f"line {number}")
    transport = connect_reader(logs_server(journal), b'{"op":"logs","follow":true}\n')
    await loop_turns()
    assert 0 < transport.get_write_buffer_size() <= FILL_BYTES + 200
    for number in range(early, total):  # the run goes on: a line never waits for a reader
        log.add("stdout", f"line {number}")
        if number % 1000 == 0:
            await loop_turns(2)
            # Written ahead of the reader: at most the fill bound (plus one line's worth).
            assert transport.get_write_buffer_size() <= FILL_BYTES + 200
    assert transport.paused
    assert journal.bytes_held <= 1024 * 1024
    journal.end(log, FAILED)
    header, *lines, done = await read_until_closed(transport)  # a buffer at a time
    numbers = [int(e["line"].split()[1]) for e in lines]
    assert numbers == sorted(numbers)
    assert header["dropped_lines"] > 0  # the buffer had dropped these before the request
    assert numbers[0] == header["dropped_lines"]  # the reader got the buffer from its start
    assert numbers[-1] == total - 1  # and ends with the run's newest lines
    assert done["event"] == "done"
    assert done["dropped_lines"] == total - header["dropped_lines"] - len(numbers) > 0
    assert transport.closed


async def test_without_follow_a_slow_reader_of_a_trimming_run_is_told_what_it_missed() -> None:
    journal = Journal(run_bytes_max=1024 * 1024)
    log = running_log(journal)
    for number in range(20_000):
        log.add("stdout", f"line {number}")
    asked = log.end_seq  # what there is at the request: all the reader is to be sent
    transport = connect_reader(
        logs_server(journal), b'{"op":"logs","id":"%s"}\n' % log.run_id.encode()
    )
    await loop_turns()
    assert transport.paused
    for number in range(20_000, 60_000):  # the run writes on and trims past the request's end
        log.add("stdout", f"line {number}")
    assert log.first_seq > asked
    header, *lines, end = await read_until_closed(transport)
    numbers = [int(e["line"].split()[1]) for e in lines]
    assert numbers == sorted(numbers)
    assert numbers[-1] < asked
    assert end["event"] == "end"  # not a silent end: the lines missed are counted, up to
    assert end["dropped_lines"] == asked - header["dropped_lines"] - len(numbers) > 0  # asked
    assert transport.closed
    assert log.followers == []


async def test_a_reader_that_leaves_stops_following() -> None:
    journal = Journal()
    log = running_log(journal)
    transport = connect_reader(logs_server(journal), b'{"op":"logs","follow":true}\n')
    await loop_turns()
    assert len(log.followers) == 1
    transport.protocol.connection_lost(None)
    assert log.followers == []
    log.add("stdout", "nobody hears this")
    journal.end(log, FAILED)


async def test_the_last_finished_runs_are_listed_newest_first() -> None:
    journal = Journal()
    logs = []
    for number in range(3):
        log = running_log(journal)
        log.add("stdout", f"line {number}")
        journal.end(log, FAILED if number == 1 else RunResult(ok=True, exit_code=0))
        logs.append(log)
    running_log(journal)  # running: not listed
    transport = connect_reader(logs_server(journal), b'{"op":"logs","runs":2}\n')
    await loop_turns()
    transport.read_all()
    (answer,) = transport.answer()
    assert answer["event"] == "runs"
    assert [run["id"] for run in answer["runs"]] == [logs[2].run_id, logs[1].run_id]
    assert answer["runs"][1] == {
        "id": logs[1].run_id,
        "task": "chatty",
        "trigger": "tick",
        "outcome": "failed",
        "reason": "exit status 3",
        "code": "failed",
        "exit_code": 3,
        "started_at": logs[1].started_at,
        "duration_ms": 12,
        "lines": 1,
        "kept_lines": 1,
    }
    assert transport.closed


@pytest.mark.parametrize(("asked", "said"), [(b',"task":"chatty"', "chatty"), (b"", "")])
async def test_following_a_task_before_its_first_run_waits_for_it(asked: bytes, said: str) -> None:
    journal = Journal()
    queue = RunQueue(4)
    transport = connect_reader(
        logs_server(journal, queue), b'{"op":"logs","follow":true%s}\n' % asked
    )
    await loop_turns()
    transport.read_all()
    (waiting,) = transport.answer()
    assert waiting == {"event": "logs", "ok": True, "id": "", "task": said, "state": "waiting"}
    assert not transport.closed
    if said:
        queue.submit(RunRequest(task="other"))  # another task's run is not the one waited for
    run = queue.submit(RunRequest(task="chatty", trigger="tick"))
    run_to_a_failed_end(journal, run, "first")
    await loop_turns()
    transport.read_all()
    header, line, done = transport.answer()[1:]
    assert (header["id"], header["state"], header["task"]) == (run.id, "queued", "chatty")
    assert (line["line"], done["event"], done["exit_code"]) == ("first", "done", 3)
    assert transport.closed
    assert len(queue._on_submit) == 0


async def test_a_follower_waiting_for_a_first_run_that_leaves_stops_waiting() -> None:
    queue = RunQueue(4)
    request = b'{"op":"logs","task":"chatty","follow":true}\n'
    transport = connect_reader(logs_server(Journal(), queue), request)
    await loop_turns()
    assert len(queue._on_submit) == 1
    transport.protocol.connection_lost(None)
    assert len(queue._on_submit) == 0
    queue.submit(RunRequest(task="chatty"))  # heard by nobody
