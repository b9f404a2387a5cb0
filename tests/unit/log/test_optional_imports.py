"""structlog imported without its console extras (daemon/log/optional_imports.py): not even
where they are installed, only for ``runbroker run``, and each importable after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.log.optional_imports import STRUCTLOG_EXTRAS, kept_out
from tests.support.fake_extras import install_extras

PROJECT = Path(__file__).resolve().parents[3]
ALL_EXTRAS = repr(sorted(STRUCTLOG_EXTRAS))

REPORT = """
import sys
{imports}
print(sorted({{name.split(".")[0] for name in sys.modules}} & set({extras!r})))
"""


def _imported(tmp_path: Path, imports: str) -> str:
    """The extras imported by ``imports`` in a process where every extra is installed."""
    site = tmp_path / "site"
    if not site.exists():
        install_extras(site)
    path = os.pathsep.join([str(site), str(PROJECT)])
    env = {**os.environ, "PYTHONPATH": path}
    code = REPORT.format(imports=imports, extras=STRUCTLOG_EXTRAS)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_structlog_alone_imports_the_installed_extras(tmp_path: Path) -> None:
    """The premise: the stand-ins are found, so an empty list below means kept out."""
    assert _imported(tmp_path, "import structlog") == ALL_EXTRAS


def test_the_daemons_import_takes_none_of_them_and_each_imports_after(tmp_path: Path) -> None:
    plain = "from daemon.log.optional_imports import import_structlog_plain\n"
    plain += "import_structlog_plain()\nimport daemon.log.logs"
    assert _imported(tmp_path, plain) == "[]"
    after = plain + "".join(f"\nimport {name}" for name in STRUCTLOG_EXTRAS)
    assert _imported(tmp_path, after) == ALL_EXTRAS


def test_a_users_process_keeps_structlog_as_installed(tmp_path: Path) -> None:
    """daemon.testing, in a user's tests, imports the log: their structlog draws with rich."""
    assert _imported(tmp_path, "import daemon.log.logs") == ALL_EXTRAS


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


LOGS_AN_ERROR = """
from daemon.log.optional_imports import import_structlog_plain
import_structlog_plain()
from daemon.log.logs import configure_logging, get_logger
configure_logging({log_format!r}, "info")
try:
    raise ValueError("the error of the test")
except ValueError:
    get_logger("runbroker.test").exception("test.failed")
"""


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_the_log_renders_an_exception_without_the_extras(tmp_path: Path, log_format: str) -> None:
    """Neither format draws with an extra: each still writes the exception's traceback."""
    site = install_extras(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PROJECT)])}
    code = LOGS_AN_ERROR.format(log_format=log_format)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "test.failed" in result.stdout
    assert "the error of the test" in result.stdout
    if log_format == "json":
        (line,) = result.stdout.splitlines()
        (raised,) = json.loads(line)["exception"]
        assert (raised["exc_type"], raised["exc_value"]) == ("ValueError", "the error of the test")
    else:
        assert "Traceback (most recent call last)" in result.stdout
