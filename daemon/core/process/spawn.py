"""How a command starts: ``os.posix_spawn``, with only what a job should inherit.

glibc's ``posix_spawn`` uses ``clone(CLONE_VFORK)``, so a start does not grow with the
daemon's memory as a fork does. Every other descriptor of the daemon is close-on-exec.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Mapping, Sequence

# Python starts with these ignored, and an ignored disposition survives exec: a job must not
# inherit it (what subprocess's restore_signals does).
_RESTORED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name)
)


def _ignored_signals() -> tuple[int, ...]:
    """Every signal the daemon ignores now, and those Python ignores: a job starts with all of
    them at their defaults (a handled signal is reset by exec itself)."""
    ignored = set(_RESTORED_SIGNALS)
    for signum in signal.valid_signals():
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:
                ignored.add(signum)
        except (ValueError, OSError):
            continue
    return tuple(sorted(ignored))


class SpawnError(Exception):
    """The command could not be started (missing, not executable, bad interpreter line)."""


class _ProgramPaths:
    """Where a bare program name is found in a PATH, as execvpe would search it, remembered.

    A search costs a stat per directory and a task runs the same program each time. A remembered
    file that is gone is searched for again."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], str] = {}

    def resolve(self, program: str, env: Mapping[str, str]) -> str:
        if "/" in program:
            return program
        key = (program, env.get("PATH", os.defpath))
        found = self._found.get(key)
        if found is None:
            found = shutil.which(program, path=key[1])
            if found is None:
                raise SpawnError(f"cannot start {program!r}: not found in PATH")
            if len(self._found) > 256:
                self._found.clear()
            self._found[key] = found
        return found

    def forget(self, program: str, env: Mapping[str, str]) -> bool:
        """Drop what was remembered for ``program``, and return whether there was anything."""
        return self._found.pop((program, env.get("PATH", os.defpath)), None) is not None


def keep_descriptors_private() -> int:
    """Mark every open descriptor but 0, 1 and 2 close-on-exec, and return how many were not.

    A job must inherit only stdin, stdout and stderr. Python, uvloop and asyncpg open theirs
    close-on-exec already (PEP 446), so this covers what the daemon inherited at start."""
    changed = 0
    try:
        entries = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for entry in entries:
        fd = int(entry)
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                os.set_inheritable(fd, False)
                changed += 1
        except OSError:
            continue  # the listing's own descriptor, closed by now
    return changed


class Spawner:
    """Starts commands (``spawn``), remembering where their programs are.

    ``posix_spawn`` cannot change a child's directory, so for a ``job_dir`` the daemon moves
    there for the spawn and back to ``daemon_dir``, between two steps of the loop."""

    def __init__(self, job_dir: str | None = None, daemon_dir: str = "/") -> None:
        keep_descriptors_private()
        self._default_signals = _ignored_signals()
        self._programs = _ProgramPaths()
        self.job_dir = job_dir
        self.daemon_dir = daemon_dir

    def spawn(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, int, int]:
        """Start ``argv``, and return its pid and the read ends of its stdout and stderr."""
        if not argv or not argv[0]:
            raise SpawnError("cannot start an empty command")
        try:
            return self._spawn_program(self._programs.resolve(argv[0], env), argv, env)
        except FileNotFoundError:
            if self._programs.forget(argv[0], env):
                # The remembered file is gone (an upgrade moved it): search the PATH again.
                with contextlib.suppress(FileNotFoundError):
                    return self._spawn_program(self._programs.resolve(argv[0], env), argv, env)
            program = self._programs.resolve(argv[0], env)
            if os.path.exists(program):
                # execve says ENOENT for a script whose #! line names a missing interpreter.
                raise SpawnError(
                    f"cannot start {argv[0]!r}: its interpreter (#! line) was not found"
                ) from None
            raise SpawnError(f"cannot start {argv[0]!r}: No such file or directory") from None

    def _spawn_program(
        self, program: str, argv: Sequence[str], env: Mapping[str, str]
    ) -> tuple[int, int, int]:
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        try:
            self._enter_job_dir(argv[0])
            pid = os.posix_spawn(
                program,
                list(argv),
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_write, 1),
                    (os.POSIX_SPAWN_DUP2, err_write, 2),
                ],
                setsid=True,
                setsigdef=self._default_signals,
                setsigmask=(),
            )
        except FileNotFoundError:
            os.close(out_read)
            os.close(err_read)
            raise  # the caller may search the PATH again
        except SpawnError:
            os.close(out_read)
            os.close(err_read)
            raise
        except (OSError, ValueError) as exc:
            os.close(out_read)
            os.close(err_read)
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SpawnError(f"cannot start {argv[0]!r}: {detail}") from None
        finally:
            if self.job_dir is not None:
                os.chdir(self.daemon_dir)
            os.close(out_write)
            os.close(err_write)
        return pid, out_read, err_read

    def _enter_job_dir(self, program: str) -> None:
        if self.job_dir is None:
            return
        try:
            os.chdir(self.job_dir)
        except OSError as exc:
            detail = exc.strerror or str(exc)
            raise SpawnError(
                f"cannot start {program!r}: working directory {self.job_dir}: {detail}"
            ) from None
