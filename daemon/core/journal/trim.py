"""What a trim of a run's log drops: its oldest lines (and their marks) down to a size, summed
a block at a time at C speed, never past a line a follower still has to read."""

from __future__ import annotations

import bisect

from daemon.core.journal.sizes import LINE_BYTES, MARK_BYTES, line_bytes

_BLOCK = 256  # lines a trim weighs at once


def oldest_to_drop(
    lines: list[str], seqs: list[int], first: int, size: int, target: int, floor: int | None
) -> tuple[int, int, int, int]:
    """The oldest lines to drop so that ``size`` comes down to ``target``, keeping line ``floor``
    and those after it (None: no such line).

    Returns how many lines, the first kept line's number, the size left, and how many marks go
    (all of them when no line is kept)."""
    count = len(lines)
    stop = count if floor is None else max(0, min(count, floor - first))
    head = mark = 0
    while size > target and stop - head > _BLOCK:
        block = lines[head : head + _BLOCK]
        if all(map(str.isascii, block)):
            cost = sum(map(len, block)) + LINE_BYTES * _BLOCK
        else:
            cost = sum(map(line_bytes, block))
        after = first + _BLOCK  # a kept line's number: the block is not the last one
        after_mark = bisect.bisect_right(seqs, after, mark) - 1  # the mark it is under
        cost += (after_mark - mark) * MARK_BYTES
        if size - cost <= target:
            break  # the bound falls in this block
        size -= cost
        head, first, mark = head + _BLOCK, after, after_mark
    while size > target and head < stop:
        size -= line_bytes(lines[head])
        head += 1
        first += 1
        while mark + 1 < len(seqs) and seqs[mark + 1] <= first:
            mark += 1  # the lines of this mark are all gone
            size -= MARK_BYTES
    if head == count:  # nothing kept: no mark either (the next line makes one)
        size -= (len(seqs) - mark) * MARK_BYTES
        mark = len(seqs)
    return head, first, size, mark
