"""The tools that can turn CI red on a release of their own are pinned, and the test command
installs with those pins: a new ruff or mypy changes nothing until the pins are rewritten."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "constraints-dev.txt"


def pinned() -> dict[str, str]:
    """Every ``name==version`` line of the constraints file, names normalised as pip does."""
    pins: dict[str, str] = {}
    for line in PINS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_test_and_lint_tool_is_pinned() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    wanted = [
        re.split(r"[<>=!~\[ ]", spec, maxsplit=1)[0]
        for spec in extras["test"] + extras["lint"] + extras["docs"]
    ]
    pins = pinned()
    missing = [name for name in wanted if re.sub(r"[-_.]+", "-", name).lower() not in pins]
    assert missing == []
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version) for version in pins.values())


def test_the_test_commands_install_with_the_pins() -> None:
    for script in ("scripts/test", "scripts/test-container"):
        installs = [
            line for line in (ROOT / script).read_text().splitlines() if "pip install" in line
        ]
        assert installs
        assert all("-c constraints-dev.txt" in line for line in installs), script
