"""The documentation's examples of ``daemon.testing`` (docs/testing.md) are the test files that
run and are type-checked: they cannot drift apart."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    ROOT / "tests" / "unit" / "testing" / "test_handlers_readme.py",
    ROOT / "tests" / "unit" / "testing" / "test_slot_simulation_readme.py",
]
PAGE = ROOT / "docs" / "testing.md"


def test_the_documented_examples_are_the_tested_files() -> None:
    section = PAGE.read_text()
    shown = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    # each without its module docstring
    tested = [example.read_text().split('"""\n\n', 1)[1] for example in EXAMPLES]
    assert shown == tested
