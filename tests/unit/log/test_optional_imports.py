"""Optional imports kept out (daemon/log/optional_imports.py): structlog's console extras are not
imported by the daemon's log even where they are installed, and stay importable after."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.log.optional_imports import STRUCTLOG_EXTRAS, kept_out

PROJECT = Path(__file__).resolve().parents[3]

REPORT = """
import sys
{imports}
print(sorted({{name.split(".")[0] for name in sys.modules}} & set({extras!r})))
"""

# A stand-in for each extra: whatever structlog reads of it at import exists.
ANYTHING = """
class _Anything:
    def __getattr__(self, name):
        return ""

    def __call__(self, *args, **kwargs):
        return self


def __getattr__(name):
    return _Anything()
"""


def _installed_extras(tmp_path: Path) -> dict[str, str]:
    """An environment where every extra is installed: a package of each name on the path."""
    for name in STRUCTLOG_EXTRAS:
        (tmp_path / name).mkdir()
        for module in ("__init__", "console", "traceback", "pretty"):
            (tmp_path / name / f"{module}.py").write_text(ANYTHING)
    path = os.pathsep.join([str(tmp_path), str(PROJECT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def _imported(env: dict[str, str], imports: str) -> str:
    code = REPORT.format(imports=imports, extras=STRUCTLOG_EXTRAS)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_structlog_alone_imports_the_installed_extras(tmp_path: Path) -> None:
    """The premise: the fakes are found, so the next test's empty list means kept out."""
    imported = _imported(_installed_extras(tmp_path), "import structlog")
    assert imported == repr(sorted(STRUCTLOG_EXTRAS))


def test_the_daemons_log_imports_none_of_them_and_each_imports_after(tmp_path: Path) -> None:
    env = _installed_extras(tmp_path)
    assert _imported(env, "import daemon.log.logs") == "[]"
    after = _imported(
        env, "import daemon.log.logs\n" + "\n".join(f"import {name}" for name in STRUCTLOG_EXTRAS)
    )
    assert after == repr(sorted(STRUCTLOG_EXTRAS))


def _import_inside(name: str) -> None:
    with kept_out((name,)):
        with pytest.raises(ImportError):
            __import__(name)
        raise RuntimeError("the block ends in an error")


def test_a_name_is_absent_within_the_block_only_even_when_it_raises() -> None:
    name = "runbroker_test_never_installed"
    with pytest.raises(RuntimeError, match="ends in an error"):
        _import_inside(name)
    assert name not in sys.modules


def test_a_module_imported_already_is_left_alone() -> None:
    with kept_out(("json",)):
        import json

        assert json.dumps(1) == "1"
    assert sys.modules["json"] is json
