"""Nothing the long README said is lost in the documentation site: every sentence, table row
and code line of it, as git holds it at the commit before the site, is found in the README,
docs/, ARCHITECTURE.md or bench/README.md, or is in the reviewed list of reworded ones."""

from __future__ import annotations

from tests.static.script_modules import load_script

LONG_README = "ea15db3"  # the last commit whose README held the whole reference


def test_every_unit_of_the_long_readme_is_in_the_site() -> None:
    coverage = load_script("docs_coverage")
    old = coverage.readme_at(LONG_README)
    assert len(coverage.units(old)) > 600
    assert coverage.missing(old) == []
