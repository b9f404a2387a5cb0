"""Nothing the long README said is lost in the documentation site: every sentence, table row
and code line of it, as git holds it at the commit before the site, is found in the README,
docs/, ARCHITECTURE.md or bench/README.md, or is in the reviewed list of reworded ones."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LONG_README = "ea15db3"  # the last commit whose README held the whole reference


def test_every_unit_of_the_long_readme_is_in_the_site() -> None:
    spec = importlib.util.spec_from_file_location(
        "docs_coverage", ROOT / "scripts" / "docs_coverage.py"
    )
    assert spec is not None
    assert spec.loader is not None
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    old = subprocess.run(
        ["git", "show", f"{LONG_README}:README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(coverage.units(old)) > 600
    assert coverage.missing(old) == []
