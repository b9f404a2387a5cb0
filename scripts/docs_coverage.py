"""Nothing an old README said is lost: every sentence, table row and code line of it (read from
git: ``python scripts/docs_coverage.py REV``, REV the last commit with the long README) is
found, normalised, in the README, docs/, ARCHITECTURE.md or bench/README.md, or is listed in
scripts/docs_coverage_dropped.txt with the reason it was dropped or reworded.

Normalised: Markdown links become their text, whitespace runs one space, and a sentence is
matched in the pages' text joined the same way. Exit 0 when nothing is missing, 1 with the
missing units (each with its line in the old README) otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DROPPED = ROOT / "scripts" / "docs_coverage_dropped.txt"
HOMES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "bench" / "README.md"]
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# A sentence ends at a full stop, a question or exclamation mark before a space and a capital
# or a backtick; abbreviations of this text ("e.g.", "i.e.") are not ends.
SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)(?<=[.!?])\s+(?=[A-Z`(\"*])")


def normalised(text: str) -> str:
    text = LINK.sub(r"\1", text)
    text = text.replace("**", "")
    return " ".join(text.split())


def units(markdown: str) -> list[tuple[int, str]]:
    """The old README's facts: each code line, each table row, each sentence of prose."""
    found: list[tuple[int, str]] = []
    in_code = False
    paragraph: list[tuple[int, str]] = []

    def flush() -> None:
        if paragraph:
            first = paragraph[0][0]
            text = normalised(" ".join(line for _, line in paragraph))
            text = re.sub(r"^(?:[-*] |#+ )", "", text)
            found.extend((first, s) for s in SENTENCE_END.split(text) if len(s) > 3)
            paragraph.clear()

    for number, line in enumerate(markdown.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code or stripped.startswith("|"):
            if stripped and not re.fullmatch(r"[|\s:-]+", stripped):
                found.append((number, normalised(stripped)))
            continue
        if not stripped or stripped.startswith(("#", "- ", "  - ")) or stripped.startswith("!["):
            flush()
            if stripped.startswith("#"):
                found.append((number, normalised(stripped.lstrip("#").strip())))
                continue
            if stripped.startswith("!["):
                found.append((number, normalised(stripped)))
                continue
        if stripped:
            paragraph.append((number, stripped))
    flush()
    return found


def corpus() -> str:
    pages = [*HOMES, *sorted((ROOT / "docs").glob("*.md"))]
    return normalised("\n".join(p.read_text(encoding="utf-8") for p in pages))


def dropped() -> set[str]:
    """The reviewed units: ``UNIT`` lines, each under a ``# reason`` line."""
    lines = DROPPED.read_text(encoding="utf-8").splitlines()
    return {normalised(line) for line in lines if line.strip() and not line.startswith("#")}


def missing(old: str) -> list[tuple[int, str]]:
    text, reviewed = corpus(), dropped()
    return [(n, unit) for n, unit in units(old) if unit not in text and unit not in reviewed]


def readme_at(revision: str) -> str:
    """The README as git holds it at ``revision``."""
    return subprocess.run(
        ["git", "show", f"{revision}:README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def main(argv: list[str]) -> int:
    revision = argv[1] if len(argv) > 1 else "HEAD"
    old = readme_at(revision)
    lost = missing(old)
    for number, unit in lost:
        print(f"README.md@{revision}:{number}: {unit}")
    print(f"{len(units(old))} units, {len(lost)} missing", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
