"""A command's output to a pipe whose reader leaves before the end (``runbroker status | head -1``).

A command that prints a whole answer (``status``, ``health``, ``next``, ``jobs list`` ...) did
its work once it has the answer: what its reader chose not to read changes nothing, so its
exit code is its own, whenever the reader left (the race between ``head`` exiting and the
command ending decided it otherwise). A command that streams a run (``trigger``, ``logs``,
``once``) ends 141 once its reader is gone: the run goes on and no one saw how it ended.
"""

from __future__ import annotations

import io
import os
import stat
import sys

from daemon.exits import EXIT_BROKEN_PIPE

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


def reader_gone() -> bool:
    """Our stdout is a pipe whose reader has closed it (``runbroker trigger x | head -1``, head
    done) although every write fit in the pipe and none failed: the kernel reports POLLERR on
    a pipe's write end without readers. A reader that is still there (``| cat``) is not waited
    for."""
    import select

    try:
        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
    except (OSError, ValueError, AttributeError):  # closed, or not a real file (a capture)
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR is reported whatever the mask
    return any(events & select.POLLERR for _, events in poller.poll(0))


def closed_output() -> int:
    """The reader of a run's output went away: exit quietly with 128 + SIGPIPE, as a shell
    reports a Unix tool that SIGPIPE ended. Whatever is still buffered goes to /dev/null, so
    the interpreter's own flush at exit cannot complain either."""
    import contextlib

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        # Not a real file (a test's capture): then nothing will flush to a pipe either.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
