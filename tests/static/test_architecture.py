"""The rules of ARCHITECTURE.md that must never break, checked on the source's imports.

Every ``import`` and ``from ... import`` in ``daemon/`` counts, at module level, inside
functions (the command line's lazy imports) and under ``TYPE_CHECKING`` alike: a rule that
only held at run time would still tie the parts together for a reader and for mypy.
"""

from __future__ import annotations

import ast
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
    # The wire's vocabulary (event kinds, reasons, constructors) is data the core emits;
    # the server, the client and everything else of the face are not the core's business.
    allowed_outside = {
        "daemon",
        "daemon.wire",
        "daemon.wire.protocol",
        "daemon.wire.control_shapes",
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
                "daemon.observe.logs",
                "daemon.observe.output_log",  # the log's writer of a job's lines
            )
            and name not in allowed_outside
        )
        or _in(name, "asyncpg", "argparse", "socket", "_socket", "daemon.settings")
    }
    assert not bad, f"{module.name} imports {sorted(bad)}"


def test_the_thin_client_knows_only_the_wire() -> None:
    (client,) = (module for module in MODULES if module.name == "daemon.wire.client")
    ours = {name for name in client.imports if _in(name, "daemon")}
    allowed = {"daemon", "daemon.wire", "daemon.wire.protocol", "daemon.wire.printer"}
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
        if _in(name, "daemon.core", "daemon.wire", "daemon.face", "daemon.app")
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


def test_only_the_store_speaks_to_postgres() -> None:
    users = [m.name for m in MODULES if any(_in(n, "asyncpg") for n in m.imports)]
    assert users
    assert all(_in(name, "daemon.pg.store") for name in users), users


MODULE_LINES_MAX = 250


def test_every_module_holds_one_concern_in_at_most_250_lines() -> None:
    lines = {m.name: len(m.path.read_text().splitlines()) for m in MODULES}
    long = {name: count for name, count in lines.items() if count > MODULE_LINES_MAX}
    assert not long, f"split these by concern: {long}"


def test_no_circle_between_modules() -> None:
    graph = {
        m.name: {n for n in m.imports if _is_daemon_module(n) and n != m.name} for m in MODULES
    }
    # A package's __init__ is imported on the way to any of its modules: that is not an arrow.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(f"{t}.")}
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
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)
