"""An answer's events as a test reads them: JSON lines, an ``output`` line with ``bytes``
followed by that many bytes of lines (a batch) given with those ``lines``."""

from __future__ import annotations

import json
from typing import Any


def answer_events(data: bytes) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    start = 0
    while (newline := data.find(b"\n", start)) >= 0:
        event = json.loads(data[start:newline])
        start = newline + 1
        size = event.get("bytes")
        if event.get("event") == "output" and isinstance(size, int):
            event["lines"] = data[start : start + size].decode().split("\n")[:-1]
            assert len(event["lines"]) == event["count"]
            start += size
        events.append(event)
    assert start == len(data), "the answer ends inside a line"
    return events


def batch_frame(run_id: str, stream: str, *lines: str) -> bytes:
    """What the daemon sends of one read's ``lines`` to a client that asked for batches."""
    data = "".join(f"{line}\n" for line in lines).encode()
    header = {"event": "output", "ok": True, "id": run_id, "stream": stream}
    return json.dumps({**header, "bytes": len(data), "count": len(lines)}).encode() + b"\n" + data
