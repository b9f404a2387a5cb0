"""structlog imported without the extras it never uses, for the commands that load the core.

structlog imports ``rich`` (and ``better_exceptions``, ``colorama``, ``twisted``) whenever they
are installed, to draw tracebacks and colours for people. The daemon draws neither (plain
tracebacks, no colours, no locals), yet where an image has rich (typer and others bring it) it
cost every start about 5 MiB and a tenth of a second of CPU, in a process that lives as long as
the container, and the same tenth of a second each ``check``, ``once`` or ``next --file`` in it.
Only those commands ask for this (``face/cli.py``): a user's own process that imports
``daemon.testing`` keeps structlog as it is installed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

STRUCTLOG_EXTRAS = ("rich", "better_exceptions", "colorama", "twisted")


@contextmanager
def kept_out(names: tuple[str, ...]) -> Iterator[None]:
    """Within the block ``import NAME`` fails as if NAME were not installed; after it, NAME
    imports as usual. A module imported already is left alone: its importer wanted it."""
    absent = [name for name in names if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not found"
    try:
        yield
    finally:
        for name in absent:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]


def import_structlog_plain() -> None:
    """Import structlog without its extras, before anything else of the daemon's does."""
    with kept_out(STRUCTLOG_EXTRAS):
        import structlog  # noqa: F401  # kept in sys.modules: every later import finds it
