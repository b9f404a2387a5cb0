"""The reference tables of the documentation site, generated from the code they describe: the
exit codes (daemon/exits.py), every command's options (the argparse parsers) and the metrics
(the registry). ``python scripts/docs_tables.py`` rewrites them in docs/; tests/static/test_docs.py
fails when a committed page differs from what this prints, so a table cannot drift.

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` in its page.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


CODE_SPAN = re.compile(r"(`+).+?\1")


def _cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table: a ``|`` escaped, but in a code span,
    where Python-Markdown's tables keep it as it is (an escape would show its backslash)."""
    text = " ".join(text.split())
    out, last = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [text[last : span.start()].replace("|", "\\|"), span.group(0)]
        last = span.end()
    return "".join([*out, text[last:].replace("|", "\\|")])


def exit_codes_table() -> str:
    """Every code of daemon/exits.py, its names and their comments, by value."""
    source = (ROOT / "daemon" / "exits.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    values: dict[str, int] = {}
    rows: dict[int, list[tuple[str, str]]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            values[name] = node.value.value
        elif isinstance(node.value, ast.Name):
            values[name] = values[node.value.id]
        else:
            continue
        # A long comment is on a line of its own inside the parentheses ruff format adds.
        span = lines[node.lineno - 1 : node.end_lineno or node.lineno]
        comment = " ".join(line.partition("#")[2].strip() for line in span if "#" in line)
        rows.setdefault(values[name], []).append((name, comment))
    out = ["| code | name in `daemon/exits.py` | meaning |", "| --- | --- | --- |"]
    for value in sorted(rows):
        names = ", ".join(f"`{name}`" for name, _ in rows[value])
        meaning = "; ".join(comment for _, comment in rows[value] if comment)
        out.append(f"| {value} | {names} | {_cell(meaning)} |")
    return "\n".join(out)


def _subcommands(
    parser: argparse.ArgumentParser,
) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each subcommand's parser and its one-line summary (the help of ``runbroker --help``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (sub, summaries.get(name, "")) for name, sub in action.choices.items()}
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """One table row per argument of ``parser`` (``-h`` left out: every command has it)."""
    rows: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:  # hidden from --help: not an argument to offer
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                shown = " ".join(metavar) if isinstance(metavar, tuple) else metavar
                name = f"{name} {shown}"
        else:
            name = str(action.metavar or action.dest)
        default = action.default
        said = (
            ""
            if default in (None, False, [], "", argparse.SUPPRESS)
            or action.nargs == "..."
            or "default" in (action.help or "")
            or f"({default})" in (action.help or "")
            else f" (default: {default})"
        )
        repeat = " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
        help_text = (action.help or "") + ("" if "repeatable" in (action.help or "") else repeat)
        rows.append(f"| {_cell(f'`{name}`')} | {_cell(help_text + said)} |")
    return rows


def _command_section(title: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    out = [f"### `{title}`", "", _cell(parser.description or summary), ""]
    rows = _options(parser)
    if rows:
        out += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    return out


def commands_reference() -> str:
    """Every command of ``runbroker`` and of ``runbroker jobs``, with every argument."""
    from daemon.face.parser import build_parser
    from daemon.pg.admin.args import jobs_parser, migrate_parser

    out: list[str] = []
    for name, (sub, summary) in _subcommands(build_parser()).items():
        if name == "jobs":
            for job_name, (job_sub, job_summary) in _subcommands(jobs_parser()).items():
                out += _command_section(f"runbroker jobs {job_name}", job_sub, job_summary)
        elif name == "migrate":
            out += _command_section("runbroker migrate", migrate_parser(), summary)
        else:
            out += _command_section(f"runbroker {name}", sub, summary)
    return "\n".join(out).rstrip()


def metrics_table() -> str:
    """Every series family the daemon's registry exposes (``/metrics``), with its help."""
    from daemon.core.runqueue import RunQueue
    from daemon.core.ticker.ticker import TickPlan
    from daemon.observe.metrics import Metrics

    plan = TickPlan(task="t", interval_s=60.0, next_fire_at=1.0)
    metrics = Metrics(RunQueue(1), tasks=("t",), plans=lambda: [plan])
    out = ["| series | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for family in metrics.registry.collect():
        suffix = "_total" if family.type == "counter" else ""
        labels = sorted({label for sample in family.samples for label in sample.labels} - {"le"})
        shown = ", ".join(f"`{label}`" for label in labels)
        out.append(
            f"| `{family.name}{suffix}` | {family.type} | {shown} | {_cell(family.documentation)} |"
        )
    return "\n".join(out)


TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "exit-codes": ("cli.md", exit_codes_table),
    "commands": ("cli.md", commands_reference),
    "metrics": ("observability.md", metrics_table),
}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)} -->\n)(.*?)(<!-- end: {re.escape(name)} -->)",
        re.DOTALL,
    )


def generated(page_text: str, name: str) -> str | None:
    """The text between a table's markers in a page, or None when the markers are missing."""
    match = _block(name).search(page_text)
    return None if match is None else match.group(2)


def rewritten() -> Iterator[tuple[Path, str]]:
    """Each page with its generated tables as the code says they are now."""
    pages: dict[str, str] = {}
    for name, (page, make) in TABLES.items():
        text = pages.get(page) or (ROOT / "docs" / page).read_text(encoding="utf-8")
        if generated(text, name) is None:
            raise SystemExit(f"docs/{page}: no markers for the table {name!r}")
        match = _block(name).search(text)
        assert match is not None
        pages[page] = text[: match.start(2)] + make() + "\n" + text[match.end(2) :]
    for page, text in pages.items():
        yield ROOT / "docs" / page, text


def main() -> int:
    for path, text in rewritten():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
