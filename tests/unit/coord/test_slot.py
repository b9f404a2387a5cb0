"""The slot file (daemon/coord/slot.py): a framed value read and rewritten under its lock, torn
contents read as empty, nothing written when the function fails, no count lost across
processes."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from daemon.coord.slot import SlotFile
from tests.unit.coord.conftest import race


def _frame(payload: bytes) -> bytes:
    return b"RBSLOT1 %08x %08x\n%s" % (len(payload), zlib.crc32(payload), payload)


def test_slot_round_trip_returns_what_fn_saw(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    assert slot.read() == b""
    assert not slot.path.exists()  # reading creates nothing
    assert slot.mutate(lambda old: old + b"a") == b""
    inode = slot.path.stat().st_ino
    assert slot.mutate(lambda old: old + b"\x00b") == b"a"
    assert slot.read() == b"a\x00b"
    assert slot.mutate(lambda _old: b"") == b"a\x00b"
    assert slot.read() == b""
    assert slot.path.stat().st_ino == inode  # rewritten in place, never replaced
    assert slot.path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x00\x00",
        b"42",
        _frame(b"hello")[:-2],  # cut short
        _frame(b"hello").replace(b"hello", b"hellO"),  # payload does not match its CRC
        _frame(b"hello")[:12],  # header cut short
        b"RBSLOT1 zzzzzzzz 00000000\nhello",
    ],
)
def test_slot_torn_contents_read_as_empty(tmp_path: Path, raw: bytes) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.path.write_bytes(raw)
    assert slot.read() == b""
    # Unchanged result: the torn bytes are left as they were (no write).
    assert slot.mutate(lambda old: old) == b""
    assert slot.path.read_bytes() == raw
    assert slot.mutate(lambda old: old + b"fresh") == b""
    assert slot.read() == b"fresh"


def test_slot_tail_left_by_an_interrupted_shrink_is_ignored(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.path.write_bytes(_frame(b"new") + b"tail of an older, longer value")
    assert slot.read() == b"new"


def test_slot_fn_error_writes_nothing(tmp_path: Path) -> None:
    slot = SlotFile(tmp_path / "slot")
    slot.mutate(lambda _old: b"kept")

    def boom(_old: bytes) -> bytes:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        slot.mutate(boom)
    assert slot.read() == b"kept"
    assert slot.mutate(lambda old: old) == b"kept"  # the lock was released


def test_slot_lossless_counter_across_processes(tmp_path: Path) -> None:
    slot_path = tmp_path / "counter"
    workers, increments = 8, 50
    outputs = race([["count", str(slot_path), str(increments)] for _ in range(workers)])
    seen = sorted(value for out in outputs for value in json.loads(out))
    # Every increment saw a distinct value: no two read-modify-writes interleaved.
    assert seen == list(range(workers * increments))
    assert SlotFile(slot_path).read() == str(workers * increments).encode()
