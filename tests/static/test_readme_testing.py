"""The README's examples of ``daemon.testing`` are the test files that run and are
type-checked: they cannot drift apart."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    ROOT / "tests" / "unit" / "testing" / "test_handlers_readme.py",
    ROOT / "tests" / "unit" / "testing" / "test_slot_simulation_readme.py",
]
HEADING = "## Testing your handlers: `daemon.testing`"


def test_the_readme_examples_are_the_tested_files() -> None:
    readme = (ROOT / "README.md").read_text()
    assert HEADING in readme
    section = readme.split(HEADING, 1)[1].split("\n## ", 1)[0]
    shown = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    # each without its module docstring
    tested = [example.read_text().split('"""\n\n', 1)[1] for example in EXAMPLES]
    assert shown == tested
