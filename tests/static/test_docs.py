"""The documentation cannot drift from the code: the settings table is the settings model's,
the generated tables (exit codes, command arguments, metrics) are what scripts/docs_tables.py
makes of the code now, the task keys table is the loader's keys, and every example runs:
each TOML block through ``runbroker check`` (the ones marked refused must be refused, with the
lines the page shows), each JSON block parses, each Python block is a tested file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.core.context_vars import ENV_PREFIX
from daemon.settings import Settings
from daemon.taskfile.loading import _KEYS as TASK_KEYS
from tests.static.script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
RUNBROKER = str(Path(sys.executable).with_name("runbroker"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!-- ([a-z]+)(?:: ([^>]*?))? -->\n\n?$")
# The handler module the examples name (``handler = "myapp.jobs:nightly"``): a stand-in, so that
# ``check`` imports it as it would import yours.
EXAMPLE_HANDLERS = """
async def nightly(run):
    return None
"""


def blocks(language: str) -> list[tuple[str, str, str | None]]:
    """Every fenced block of ``language`` in the README and docs/: (where, text, the mark of
    the HTML comment right before it, if any)."""
    found: list[tuple[str, str, str | None]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) != language:
                continue
            line = text.count("\n", 0, match.start()) + 1
            mark = MARK.search(text[: match.start()])
            said = None if mark is None else f"{mark.group(1)}: {mark.group(2) or ''}".strip()
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(2), said))
    assert found, f"no {language} block at all"
    return found


def _table_rows(page: Path, header: str) -> list[list[str]]:
    """The rows of the Markdown table under ``header`` in ``page``, cells stripped."""
    text = page.read_text(encoding="utf-8")
    assert header in text, f"{page.name}: no table headed {header!r}"
    rows: list[list[str]] = []
    for line in text.split(header, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _env_name(name: str, alias: str | None) -> str:
    return alias or f"{ENV_PREFIX}{name}".upper()


def test_the_settings_table_is_the_settings_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every setting once, with the default the model has: a setting added to the daemon and
    not to docs/settings.md, or a default changed on one side only, fails here."""
    rows = _table_rows(DOCS / "settings.md", "| variable | default | meaning |")
    shown = {f"{ENV_PREFIX}{row[0].strip('`')}": row[1] for row in rows}
    fields = {_env_name(name, field.alias): name for name, field in Settings.model_fields.items()}
    assert sorted(shown) == sorted(fields)
    for variable in os.environ:
        if variable.startswith(ENV_PREFIX):
            monkeypatch.delenv(variable)
    defaults = Settings()
    for variable, cell in shown.items():
        name = fields[variable]
        default = getattr(defaults, name)
        value = re.match(r"`([^`]*)`", cell)
        if value is None:  # "unset", "empty: ...", "the socket's directory", nothing
            assert default in (None, ""), (
                f"{variable}: the table says {cell!r}, the model {default!r}"
            )
            continue
        monkeypatch.setenv(variable, value.group(1))
        assert getattr(Settings(), name) == default, f"{variable}: {cell!r} is not the default"
        monkeypatch.delenv(variable)


def test_the_generated_tables_are_the_code() -> None:
    """Exit codes, every command's arguments and the metrics, as scripts/docs_tables.py makes
    them now (run it to bring the pages up to date)."""
    for path, text in load_script("docs_tables").rewritten():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} differs from the code: run python scripts/docs_tables.py"
        )


def test_the_generated_tables_say_every_meaning_and_no_hidden_argument() -> None:
    """Each exit code has its comment, also one that ruff format put on a line of its own, and
    an argument hidden from ``--help`` is not offered in the command reference."""
    tables = load_script("docs_tables")
    rows = [line.split(" | ") for line in tables.exit_codes_table().splitlines()[2:]]
    assert rows
    assert all(row[2].strip(" |") for row in rows), rows
    assert "once --skip" in tables.exit_codes_table()
    assert "SUPPRESS" not in tables.commands_reference()


def test_the_task_keys_table_is_every_key_the_loader_takes() -> None:
    header = "| key | type | default | meaning | example |"
    keys = [row[0].strip("`") for row in _table_rows(DOCS / "tasks.md", header)]
    assert sorted(keys) == sorted(TASK_KEYS)
    assert len(keys) == len(set(keys))


def _secrets(text: str, root: Path) -> tuple[str, dict[str, str]]:
    """What an example's notify tables read (``url_file``, ``url_env``), made to exist: the
    block with its files under ``root``, and the variables."""
    env = dict.fromkeys(re.findall(r'url_env = "(\w+)"', text), "https://hooks.example.test/T0")
    for path in re.findall(r'url_file = "([^"]+)"', text):
        local = root / "secrets" / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text("https://hc-ping.example.test/0000\n")
        text = text.replace(f'"{path}"', json.dumps(str(local)))
    return text, env


def _check(path: str, text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    handlers = cwd / "handlers" / "myapp"
    handlers.mkdir(parents=True, exist_ok=True)
    (handlers / "__init__.py").write_text("")
    (handlers / "jobs.py").write_text(EXAMPLE_HANDLERS)
    text, secrets = _secrets(text, cwd)
    file = cwd / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env |= secrets | {"PYTHONPATH": str(cwd / "handlers")}
    return subprocess.run(
        [RUNBROKER, "check", path],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(("where", "text", "mark"), blocks("toml"), ids=lambda x: str(x)[:40])
def test_every_toml_example_is_what_check_says(
    where: str, text: str, mark: str | None, tmp_path: Path
) -> None:
    """A TOML example is taken by ``runbroker check``, or, marked ``refused: PATH``, refused
    (exit 2) with exactly the lines the page shows."""
    if mark is not None and mark.startswith("refused"):
        path = mark.split(":", 1)[1].strip()
        done = _check(path, text, tmp_path)
        assert done.returncode == 2, f"{where}: taken, but marked refused"
        page = (ROOT / where.split(":")[0]).read_text(encoding="utf-8")
        for line in done.stderr.splitlines():
            assert line in page, f"{where}: check says {line!r}, which the page does not show"
        assert done.stderr.strip(), where
        return
    done = _check("tasks.toml", text, tmp_path)
    assert done.returncode == 0, f"{where}: {done.stderr}"
    assert done.stdout == "tasks.toml: ok\n"


def test_every_json_example_parses() -> None:
    for where, text, _mark in blocks("json"):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        try:
            json.loads(text)
        except json.JSONDecodeError:
            for line in lines:  # JSON lines (a log)
                parsed: Any = json.loads(line)
                assert isinstance(parsed, dict), where


def test_every_python_example_is_a_tested_file() -> None:
    """Each Python block is a test file of tests/unit/testing word for word (without its
    docstring), so it runs and is type-checked with the suite."""
    tested = [
        path.read_text(encoding="utf-8").split('"""\n\n', 1)[1]
        for path in sorted((ROOT / "tests" / "unit" / "testing").glob("test_*_readme.py"))
    ]
    for where, text, _mark in blocks("python"):
        assert text in tested, f"{where}: a Python example that no test runs"


def test_the_image_recipe_is_the_same_in_the_readme_and_the_site() -> None:
    """The container tier builds the README's; getting-started.md shows the same lines."""

    def recipe(page: Path) -> list[str]:
        section = page.read_text(encoding="utf-8").split("## Add it to your image", 1)[1]
        return FENCE.findall(section.split("\n## ", 1)[0])

    assert recipe(ROOT / "README.md") == recipe(DOCS / "getting-started.md")
    assert len(recipe(ROOT / "README.md")) == 2  # the Dockerfile and the docker lines


def test_the_tour_writes_the_tasks_file_it_shows() -> None:
    """The tour's shell lines write the file its checked TOML block shows (the sessions test
    gives the daemon that block)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (written,) = re.findall(r"cat > tasks\.toml <<'EOF'\n(.*?)^EOF$", readme, re.S | re.M)
    shown = [text for _where, text, mark in blocks("toml") if mark == "tour: tasks file"]
    assert shown == [written]
