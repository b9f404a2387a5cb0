"""A command's output to a pipe whose reader leaves before the end (``runbroker status | head -1``).

A command that prints a whole answer (``status``, ``health``, ``next``, ``jobs list`` ...) did
its work once it has the answer: what its reader chose not to read changes nothing, so its
exit code is its own, whenever the reader left (whether ``head`` exits before the command
ends is a race: a code that hung on it would vary from one run to the next). A command that
streams a run (``trigger``, ``logs``, ``once``) ends 141 once its reader is gone (``cli``,
which a cold trigger loads anyway): the run goes on and no one saw how it ended.
"""

from __future__ import annotations

import io
import os
import stat
import sys

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class DropOnceClosed(io.RawIOBase):
    """A file descriptor's writes until its reader has gone; then each is dropped, quietly."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.reader_gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: ReadableBuffer) -> int:
        size = memoryview(data).nbytes
        if not self.reader_gone:
            try:
                return os.write(self.fd, data)
            except BrokenPipeError:
                self.reader_gone = True
        return size


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def drop_output_once_closed() -> None:
    """Our stdout, when a pipe, written through ``DropOnceClosed``: a reader that leaves
    early costs no error, and the command's exit code stands."""
    out = sys.stdout
    try:
        fd = out.fileno()
        if not _is_pipe(fd):
            return
    except (OSError, ValueError, AttributeError):  # closed, or not a real file (a capture)
        return
    out.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(DropOnceClosed(fd)),
        encoding=out.encoding,
        errors=out.errors,
    )
