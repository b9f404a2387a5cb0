"""The README's example of ``daemon.testing`` is the test file that runs and is type-checked:
the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "unit" / "testing" / "test_handlers_readme.py"
HEADING = "## Testing your handlers: `daemon.testing`"


def test_the_readme_example_is_the_tested_file() -> None:
    readme = (ROOT / "README.md").read_text()
    assert HEADING in readme
    section = readme.split(HEADING, 1)[1].split("\n## ", 1)[0]
    shown = section.split("```python\n", 1)[1].split("```", 1)[0]
    tested = EXAMPLE.read_text().split('"""\n\n', 1)[1]  # without the module docstring
    assert shown == tested
