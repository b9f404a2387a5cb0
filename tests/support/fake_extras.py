"""Stand-ins for structlog's optional extras (``daemon.log.optional_imports``), installed as
packages on a path: each has whatever attribute structlog reads of it, and when imported, with
``FAKE_EXTRAS_MARKS`` set, leaves a file of its name in that directory."""

from __future__ import annotations

from pathlib import Path

from daemon.log.optional_imports import STRUCTLOG_EXTRAS

MARKS_VARIABLE = "FAKE_EXTRAS_MARKS"

STAND_IN = f"""
import os

_marks = os.environ.get({MARKS_VARIABLE!r})
if _marks:
    open(os.path.join(_marks, __name__), "w").close()


class _Anything:
    def __getattr__(self, name):
        return ""

    def __call__(self, *args, **kwargs):
        return self


def __getattr__(name):
    return _Anything()
"""


def install_extras(path: Path) -> Path:
    """Every extra as a package under ``path`` (with the submodules structlog imports), which is
    returned, to be put on PYTHONPATH."""
    for name in STRUCTLOG_EXTRAS:
        (path / name).mkdir(parents=True)
        for module in ("__init__", "console", "traceback", "pretty"):
            (path / name / f"{module}.py").write_text(STAND_IN)
    return path
