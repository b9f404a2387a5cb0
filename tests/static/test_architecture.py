"""The rules of ARCHITECTURE.md that must never break, checked on the source's imports.

Every ``import`` and ``from ... import`` in ``daemon/`` counts, at module level, inside
functions (the command line's lazy imports) and under ``TYPE_CHECKING`` alike: a rule that
only held at run time would still tie the parts together for a reader and for mypy.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "daemon"


@dataclass(frozen=True)
class Module:
    name: str  # dotted: daemon.core.executor
    path: Path
    imports: frozenset[str]  # dotted names of the modules it imports


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_daemon_module(dotted: str) -> bool:
    relative = Path(*dotted.split("."))
    base = PACKAGE.parent / relative
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports_of(path: Path) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            for alias in node.names:  # from daemon.wire import protocol: the module
                dotted = f"{node.module}.{alias.name}"
                if dotted.startswith("daemon") and _is_daemon_module(dotted):
                    found.add(dotted)
    return frozenset(found)


def _modules() -> Iterator[Module]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield Module(_module_name(path), path, _imports_of(path))


MODULES = list(_modules())


def _in(name: str, *parts: str) -> bool:
    return any(name == part or name.startswith(f"{part}.") for part in parts)


def _of(*parts: str) -> list[Module]:
    chosen = [module for module in MODULES if _in(module.name, *parts)]
    assert chosen, f"no module under {parts}: has the layout moved? update ARCHITECTURE.md"
    return chosen


def _ids(modules: list[Module]) -> list[str]:
    return [module.name for module in modules]


def test_the_walk_sees_the_package() -> None:
    names = {module.name for module in MODULES}
    assert {"daemon.core.executor", "daemon.wire.protocol", "daemon.schedules"} <= names
    attempt = next(module for module in MODULES if module.name == "daemon.core.attempt")
    assert "daemon.wire.protocol" in attempt.imports  # ``from daemon.wire import protocol``


@pytest.mark.parametrize("module", _of("daemon.core"), ids=_ids(_of("daemon.core")))
def test_the_core_knows_no_database_socket_or_command_line(module: Module) -> None:
    # The wire's vocabulary (event kinds, constructors; reasons and their codes) is data the
    # core emits; the server, the client and everything else of the face are not its business.
    allowed_outside = {
        "daemon",
        "daemon.wire",
        "daemon.wire.protocol",
        "daemon.wire.reasons",
        "daemon.wire.control_shapes",
        "daemon.coord.guard",  # the one flock rule: the state directory is locked with it
    }
    bad = {
        name
        for name in module.imports
        if (
            _in(name, "daemon")
            and not _in(
                name,
                "daemon.core",
                "daemon.schedules",
                "daemon.log",
            )
            and name not in allowed_outside
        )
        or _in(name, "asyncpg", "argparse", "socket", "_socket", "daemon.settings")
    }
    assert not bad, f"{module.name} imports {sorted(bad)}"


USER_FILE_READERS = ("tomllib", "importlib")  # the tasks file's TOML; its handlers' modules


def _reads_user_files(module: Module) -> list[str]:
    """What ``module`` imports to read a file of the user's or import a module of theirs."""
    return sorted(
        name for name in module.imports if _in(name, *USER_FILE_READERS, "daemon.taskfile")
    )


def test_the_user_files_check_refuses_toml_and_imported_modules(tmp_path: Path) -> None:
    def planted(*imports: str) -> Module:
        return Module("daemon.core.planted", tmp_path / "planted.py", frozenset(imports))

    assert _reads_user_files(planted("tomllib")) == ["tomllib"]
    assert _reads_user_files(planted("importlib", "importlib.util")) == [
        "importlib",
        "importlib.util",
    ]
    assert _reads_user_files(planted("daemon.taskfile.loading")) == ["daemon.taskfile.loading"]
    assert _reads_user_files(planted("json", "daemon.core.tasks", "daemon.schedules")) == []


@pytest.mark.parametrize("module", _of("daemon.core"), ids=_ids(_of("daemon.core")))
def test_the_core_reads_no_file_of_the_user_s(module: Module) -> None:
    # The tasks file and the handlers it names are read by daemon/taskfile, above the core.
    bad = _reads_user_files(module)
    assert not bad, f"{module.name} imports {bad}"


def test_the_thin_client_knows_only_the_wire() -> None:
    (client,) = (module for module in MODULES if module.name == "daemon.wire.client")
    ours = {name for name in client.imports if _in(name, "daemon")}
    allowed = {
        "daemon",
        "daemon.wire",
        "daemon.wire.protocol",
        "daemon.wire.reasons",
        "daemon.wire.printer",
    }
    assert ours <= {*allowed, "daemon.wire.client_socket", "daemon.exits"}, ours
    assert not {name for name in client.imports if _in(name, "pydantic", "structlog", "uvloop")}
    parts = {"daemon.wire.printer": set(), "daemon.wire.client_socket": {"daemon.wire.peer"}}
    for name, more in parts.items():
        (part,) = (module for module in MODULES if module.name == name)
        wire = {"daemon", "daemon.wire", "daemon.wire.protocol", *more}
        assert {imported for imported in part.imports if _in(imported, "daemon")} <= wire


@pytest.mark.parametrize("module", _of("daemon.pg.store"), ids=_ids(_of("daemon.pg.store")))
def test_the_store_knows_no_executor(module: Module) -> None:
    bad = {
        name
        for name in module.imports
        if _in(name, "daemon.core", "daemon.wire", "daemon.server", "daemon.face", "daemon.broker")
    }
    assert not bad, f"{module.name} imports {sorted(bad)}"


@pytest.mark.parametrize("module", _of("daemon.schedules"), ids=_ids(_of("daemon.schedules")))
def test_schedule_math_is_pure(module: Module) -> None:
    impure = ("asyncio", "os", "socket", "subprocess", "threading", "time", "random", "logging")
    bad = {
        name
        for name in module.imports
        if (_in(name, "daemon") and not _in(name, "daemon.schedules")) or _in(name, *impure)
    }
    assert not bad, f"{module.name} imports {sorted(bad)}"


LOG_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})


def _stdlib_logging_uses(source: str) -> list[str]:
    """What a module does with the standard library's ``logging`` beyond naming its levels."""
    tree = ast.parse(source)
    uses: list[str] = []
    bound: set[str] = set()  # the names the logging module is imported as
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "logging":
                    bound.add(alias.asname or alias.name)
                elif _in(alias.name, "logging"):
                    uses.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and _in(node.module, "logging"):
            uses.extend(
                f"from {node.module} import {alias.name}"
                for alias in node.names
                if node.module != "logging" or alias.name not in LOG_LEVELS
            )
    named: set[int] = set()  # the module's names read as ``logging.<attribute>``
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
        ):
            named.add(id(node.value))
            if node.attr not in LOG_LEVELS:
                uses.append(f"{node.value.id}.{node.attr}")
    uses.extend(
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in bound and id(node) not in named
    )
    return uses


def test_the_logging_check_refuses_a_stdlib_logger() -> None:
    assert _stdlib_logging_uses("import logging\nenabled(logging.DEBUG)\n") == []
    assert _stdlib_logging_uses("from logging import INFO\n") == []
    planted = "import logging\nLOG = logging.getLogger('runbroker.x')\nLOG.info('x.y')\n"
    assert _stdlib_logging_uses(planted) == ["logging.getLogger"]
    assert _stdlib_logging_uses("import logging as lg\nh: lg.Handler\n") == ["lg.Handler"]
    assert _stdlib_logging_uses("from logging import getLogger\n") == [
        "from logging import getLogger"
    ]
    assert _stdlib_logging_uses("import logging.handlers\n") == ["import logging.handlers"]
    assert _stdlib_logging_uses("import logging\nuse(logging)\n") == ["logging"]


OUTSIDE_THE_LOG = [m for m in MODULES if not _in(m.name, "daemon.log")]


@pytest.mark.parametrize("module", OUTSIDE_THE_LOG, ids=_ids(OUTSIDE_THE_LOG))
def test_every_part_writes_the_one_log(module: Module) -> None:
    uses = _stdlib_logging_uses(module.path.read_text())
    assert not uses, f"{module.name} uses stdlib logging ({uses}): write through daemon.log"


def test_only_the_store_speaks_to_postgres() -> None:
    users = [m.name for m in MODULES if any(_in(n, "asyncpg") for n in m.imports)]
    assert users
    assert all(_in(name, "daemon.pg.store") for name in users), users


# What of the core may know the ticker: the ticker itself, and the tasks (a task's ``on_busy``
# and ``misfire`` words are the ticker's).
TICKER = "daemon.core.ticker"
TICKER_KNOWERS = (TICKER, "daemon.core.tasks")


def _ticker_breaches(modules: list[Module]) -> list[str]:
    """The core's imports of the ticker outside ``TICKER_KNOWERS``: the queue, the executor,
    the processes and the journal serve every producer alike, the ticker one of them."""
    return [
        f"{module.name} imports {name}"
        for module in modules
        if _in(module.name, "daemon.core") and not _in(module.name, *TICKER_KNOWERS)
        for name in sorted(module.imports)
        if _in(name, TICKER)
    ]


def test_the_ticker_check_refuses_the_run_path_importing_it() -> None:
    def module(name: str, *imports: str) -> Module:
        return Module(name, PACKAGE / "planted.py", frozenset(imports))

    planted = module("daemon.core.executor", "daemon.core.runqueue", "daemon.core.ticker.busy")
    assert _ticker_breaches([planted]) == ["daemon.core.executor imports daemon.core.ticker.busy"]
    allowed = [
        module("daemon.core.ticker.ticker", "daemon.core.ticker.slots", "daemon.core.runqueue"),
        module("daemon.core.tasks.registry", "daemon.core.ticker.busy"),
        module("daemon.broker.app", "daemon.core.ticker.ticker"),
    ]
    assert _ticker_breaches(allowed) == []


def test_the_run_path_knows_no_ticker() -> None:
    breaches = _ticker_breaches(MODULES)
    assert not breaches, "\n".join(breaches)


MODULE_LINES_MAX = 400


def test_every_module_holds_one_concern_in_at_most_400_lines() -> None:
    lines = {m.name: len(m.path.read_text().splitlines()) for m in MODULES}
    long = {name: count for name, count in lines.items() if count > MODULE_LINES_MAX}
    assert not long, f"split these by concern: {long}"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a walk of ``graph`` finds, each as the names along it."""
    circles: list[list[str]] = []
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            circles.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for target in sorted(graph.get(name, ())):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return circles


def test_the_circle_check_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_circle_between_modules() -> None:
    graph = {
        m.name: {n for n in m.imports if _is_daemon_module(n) and n != m.name} for m in MODULES
    }
    # A package's __init__ is imported on the way to any of its modules: that is not an arrow.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(f"{t}.")}
    circles = _circles(graph)
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


# The parts of the package: its sub-packages and its top-level modules (``daemon.face``,
# ``daemon.settings``); ``daemon`` itself (its version) belongs to none.
def _part(dotted: str) -> str | None:
    names = dotted.split(".")
    return names[1] if len(names) > 1 and names[0] == "daemon" else None


def _part_graph(modules: list[Module]) -> dict[str, set[str]]:
    """Which part imports which other, from every import of every module."""
    graph: dict[str, set[str]] = {}
    for module in modules:
        source = _part(module.name)
        if source is None:
            continue
        targets = graph.setdefault(source, set())
        targets.update(
            target
            for target in map(_part, module.imports)
            if target is not None and target != source
        )
    return graph


def test_no_circle_between_parts() -> None:
    circles = _circles(_part_graph(MODULES))
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
LAYERS_HEADING = "## The layers"
_LAYER_ROW = re.compile(r"^\d+\.\s+((?:`[^`]+`(?:,\s*)?)+)")


def _layer_rows(markdown: str) -> list[list[str]]:
    """The layer order written under ``LAYERS_HEADING``, top first: one numbered line per
    layer, its parts in backticks at the line's start (``face/``, ``settings.py``)."""
    lines = markdown.splitlines()
    start = lines.index(LAYERS_HEADING) + 1
    rows: list[list[str]] = []
    for line in lines[start:]:
        if line.startswith("#"):
            break
        match = _LAYER_ROW.match(line)
        if match:
            names = re.findall(r"`([^`]+)`", match.group(1))
            rows.append([name.removesuffix("/").removesuffix(".py") for name in names])
    return rows


def _layer_breaches(graph: dict[str, set[str]], rows: list[list[str]]) -> list[str]:
    """The imports that do not go down: a part imports only parts on rows below its own."""
    row_of = {name: index for index, row in enumerate(rows) for name in row}
    breaches: list[str] = []
    for source in sorted(graph):
        for target in sorted(graph[source]):
            if source not in row_of or target not in row_of:
                breaches.append(f"{source} -> {target}: not both in the layer order")
            elif row_of[target] <= row_of[source]:
                breaches.append(
                    f"{source} (layer {row_of[source] + 1}) imports {target} "
                    f"(layer {row_of[target] + 1})"
                )
    return breaches


LAYERS = _layer_rows(ARCHITECTURE.read_text())


def test_the_layer_check_refuses_an_import_up_or_sideways() -> None:
    rows = _layer_rows(
        "# x\n\n## The layers\n\nTop first.\n\n1. `face/`: top\n2. `core/`, `pg.py`\n"
        "3. `log/`: the ground\n\n## Next\n\n4. `later/`\n"
    )
    assert rows == [["face"], ["core", "pg"], ["log"]]
    assert _layer_breaches({"face": {"core", "log"}, "core": {"log"}}, rows) == []
    assert _layer_breaches({"log": {"face"}}, rows) == ["log (layer 3) imports face (layer 1)"]
    assert _layer_breaches({"core": {"pg"}}, rows) == ["core (layer 2) imports pg (layer 2)"]
    assert _layer_breaches({"face": {"cli"}}, rows) == ["face -> cli: not both in the layer order"]


def test_every_part_is_in_the_layer_order_once() -> None:
    listed = [name for row in LAYERS for name in row]
    parts = {part for part in map(_part, (m.name for m in MODULES)) if part is not None}
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == parts, f"ARCHITECTURE.md's layers: {sorted(listed)}, parts: {parts}"


def test_the_imports_follow_the_layer_order() -> None:
    breaches = _layer_breaches(_part_graph(MODULES), LAYERS)
    assert not breaches, "\n".join(breaches)


def test_every_home_in_the_table_exists() -> None:
    text = ARCHITECTURE.read_text()
    table = text[text.index("## Where each concern lives") :].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows
    missing = [
        home
        for row in rows
        for home in re.findall(r"`([^`]+)`", row.split(" | ")[0])
        if not (PACKAGE / home).exists()
    ]
    assert not missing, missing


def test_the_tasks_file_is_read_beside_the_settings_above_the_core() -> None:
    (row,) = (index for index, names in enumerate(LAYERS) if "taskfile" in names)
    assert "settings" in LAYERS[row]
    assert "core" in LAYERS[row + 1]
    reading = {"broker": {"taskfile"}, "taskfile": {"core", "schedules"}}
    assert _layer_breaches(reading, LAYERS) == []
    assert _layer_breaches({"core": {"taskfile"}}, LAYERS) == [
        f"core (layer {row + 2}) imports taskfile (layer {row + 1})"
    ]
    assert _layer_breaches({"taskfile": {"settings"}}, LAYERS) == [
        f"taskfile (layer {row + 1}) imports settings (layer {row + 1})"
    ]
    assert _layer_breaches({"taskfile": {"notify"}}, LAYERS) != []


ENVIRONMENT_RULE = "- **One place reads the environment:**"
_ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
_OS_MODULES = {"os", "posix"}
_COUNTS = {"no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _touches_environment(source: str) -> bool:
    """``source`` reads or sets the process environment through ``os`` (``os.environ``,
    ``os.getenv``, ``from os import environ`` ..., under any name it imports ``os`` as)."""
    tree = ast.parse(source)
    names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name in _OS_MODULES
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _OS_MODULES:
            if any(alias.name in _ENVIRONMENT_NAMES for alias in node.names):
                return True
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in _ENVIRONMENT_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in names
        ):
            return True
    return False


def _environment_rule(markdown: str) -> tuple[str, int | None, list[str]]:
    """The environment rule's one reader, the number of exceptions it says, and the modules
    it lists as those exceptions (each an indented item that starts with its path)."""
    lines = markdown.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(ENVIRONMENT_RULE))
    rule = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rule.append(line)
    text = " ".join(rule)
    reader = re.findall(r"\*\* `([^`]+)`", text)[0]
    said = re.search(r"\b([a-z]+)\s+exceptions?\b", text, re.IGNORECASE)
    count = _COUNTS.get(said.group(1).lower()) if said else None
    listed = [match.group(1) for line in rule if (match := re.match(r"\s+- `([^`]+)`", line))]
    return reader, count, listed


def _environment_breaches(
    readers: set[str], reader: str, count: int | None, listed: list[str]
) -> list[str]:
    """How the modules that touch the environment (paths from the repository's root) differ
    from the rule: a reader it does not list, a listed module that reads nothing, a count
    that is not the list's."""
    allowed = {reader, *listed}
    breaches = [f"{path} reads the environment, unlisted" for path in sorted(readers - allowed)]
    breaches += [f"{path} is listed but reads no environment" for path in sorted(allowed - readers)]
    if count != len(listed):
        breaches.append(f"the rule says {count} exceptions and lists {len(listed)}")
    return breaches


def test_the_environment_check_sees_each_way_to_touch_it() -> None:
    assert _touches_environment("import os\nvalue = os.environ['HOME']\n")
    assert _touches_environment("import os as _os\ndef f():\n    return _os.getenv('HOME')\n")
    assert _touches_environment("from os import environ\n")
    assert _touches_environment("import os\nos.putenv('A', 'b')\n")
    assert not _touches_environment("import os\nos.path.join('a', 'b')\n")
    assert not _touches_environment("environ = {}\nenviron.get('HOME')\n")
    assert not _touches_environment('"""os.environ, in a docstring"""\n')


def test_the_environment_check_refuses_a_reader_the_rule_does_not_list() -> None:
    rule = (
        "## Rules\n\n"
        "- **One place reads the environment:** `daemon/settings.py`. Two exceptions:\n"
        "  - `daemon/wire/client_socket.py`: the socket;\n"
        "  - `daemon/core/jobenv.py`: passed on.\n"
        "- **Next rule.** `daemon/other.py`\n"
    )
    reader, count, listed = _environment_rule(rule)
    assert (reader, count) == ("daemon/settings.py", 2)
    assert listed == ["daemon/wire/client_socket.py", "daemon/core/jobenv.py"]
    readers = {reader, *listed}
    assert _environment_breaches(readers, reader, count, listed) == []
    planted = {*readers, "daemon/notify/hook.py"}
    assert _environment_breaches(planted, reader, count, listed) == [
        "daemon/notify/hook.py reads the environment, unlisted"
    ]
    assert _environment_breaches(readers - {"daemon/core/jobenv.py"}, reader, count, listed) == [
        "daemon/core/jobenv.py is listed but reads no environment"
    ]
    assert _environment_breaches(readers, reader, 3, listed) == [
        "the rule says 3 exceptions and lists 2"
    ]


def test_only_the_listed_modules_touch_the_environment() -> None:
    readers = {
        str(module.path.relative_to(PACKAGE.parent))
        for module in MODULES
        if _touches_environment(module.path.read_text())
    }
    reader, count, listed = _environment_rule(ARCHITECTURE.read_text())
    assert reader == "daemon/settings.py"
    breaches = _environment_breaches(readers, reader, count, listed)
    assert not breaches, "\n".join(breaches)
