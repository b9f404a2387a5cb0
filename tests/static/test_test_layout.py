"""The test tree's layout: each tier (unit, integration, acceptance, container, static) imports
only its own modules and tests/support, and tests/support imports no tier, so a helper two
tiers need has one home and running one tier never loads another's test modules; and the unit
tier mirrors the package, so a module's tests are found where the module stands."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "integration", "acceptance", "container", "static")
SUPPORT = "support"


def _test_imports(source: str) -> set[str]:
    """The dotted names under ``tests`` that ``source`` imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "tests" and node.level == 0:
            found.update(f"tests.{alias.name}" for alias in node.names)  # from tests import unit
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.startswith("tests.")}


def _foreign(package: str, source: str) -> list[str]:
    """The imports of ``source`` (a module of tests/``package``) that reach a tier other than
    its own: tests/support may be imported by every tier, and imports none."""
    allowed = {package, SUPPORT}
    return sorted(name for name in _test_imports(source) if name.split(".")[1] not in allowed)


def test_the_check_refuses_an_import_of_another_tier() -> None:
    source = (
        "from tests.support.harness import Daemon\n"
        "from tests.container.conftest import Engine\n"
        "def f():\n"
        "    import tests.acceptance.test_reload\n"
        "from tests import unit\n"
    )
    assert _foreign("container", source) == [
        "tests.acceptance.test_reload",
        "tests.unit",
    ]
    assert _foreign("support", source) == [
        "tests.acceptance.test_reload",
        "tests.container.conftest",
        "tests.unit",
    ]


@pytest.mark.parametrize("package", [*TIERS, SUPPORT])
def test_each_tier_imports_only_itself_and_the_support(package: str) -> None:
    modules = sorted((TESTS / package).rglob("*.py"))
    assert modules, f"tests/{package} has no module"
    reaching = {
        str(path.relative_to(TESTS)): foreign
        for path in modules
        if (foreign := _foreign(package, path.read_text()))
    }
    assert reaching == {}


def test_every_package_of_the_tree_is_a_tier_or_the_support() -> None:
    packages = {path.parent.name for path in TESTS.glob("*/__init__.py")}
    assert packages == {*TIERS, SUPPORT}


PACKAGE = TESTS.parent / "daemon"


def _modules(folder: Path) -> set[str]:
    """The names of the modules in ``folder`` (not its sub-packages, which have folders of
    their own)."""
    return {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}


def _names_a_module(test_file: str, modules: set[str]) -> bool:
    """``test_<module>.py`` or ``test_<module>_<aspect>.py`` for one of ``modules``."""
    name = test_file.removeprefix("test_").removesuffix(".py")
    return any(name == module or name.startswith(f"{module}_") for module in modules)


def _unmirrored(unit: Path, package: Path, support: Path) -> list[str]:
    """The folders and test modules of the unit tier ``unit`` that do not mirror ``package``:
    each folder is a package that names a sub-package of it, and each ``test_X.py`` starts with
    the name of a module of its folder's sub-package; at the top, of a top-level module of the
    package or of tests/``support``, whose own tests stand there."""
    wrong: list[str] = []
    for folder in sorted(path for path in unit.rglob("*") if path.is_dir()):
        if folder.name == "__pycache__":
            continue
        where = folder.relative_to(unit)
        if not (package / where / "__init__.py").is_file():
            wrong.append(f"{where}/: no sub-package daemon/{where}")
        elif not (folder / "__init__.py").is_file():
            wrong.append(f"{where}/: no __init__.py")
    for test_file in sorted(unit.rglob("test_*.py")):
        where = test_file.parent.relative_to(unit)
        modules = _modules(package / where)
        if where == Path("."):
            modules |= _modules(support)
        if (package / where).is_dir() and not _names_a_module(test_file.name, modules):
            home = "daemon" if where == Path(".") else f"daemon/{where}"
            wrong.append(f"{test_file.relative_to(unit)}: names no module of {home}")
    return wrong


def test_the_mirror_check_refuses_a_folder_or_a_file_that_names_nothing(tmp_path: Path) -> None:
    package, unit, support = tmp_path / "daemon", tmp_path / "unit", tmp_path / "support"
    for path in (
        "settings.py",
        "core/__init__.py",
        "core/executor.py",
        "core/process/__init__.py",
        "core/process/child.py",
        "olds/executor.py",  # a folder, but no package
    ):
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).touch()
    support.mkdir()
    (support / "eventually.py").touch()
    for path in (
        "__init__.py",
        "test_settings.py",
        "test_eventually.py",
        "test_exits.py",  # no such top-level module
        "core/__init__.py",
        "core/executing.py",  # a helper, not a test module
        "core/test_executor.py",
        "core/test_executor_cancel.py",
        "core/test_execute.py",  # the module's name, cut short
        "core/test_child.py",  # a module of core/process, not of core
        "core/process/test_child_pipes.py",  # a folder without __init__.py
        "runner/__init__.py",
        "runner/test_runner.py",  # no sub-package daemon/runner
        "olds/__init__.py",
    ):
        (unit / path).parent.mkdir(parents=True, exist_ok=True)
        (unit / path).touch()
    assert _unmirrored(unit, package, support) == [
        "core/process/: no __init__.py",
        "olds/: no sub-package daemon/olds",
        "runner/: no sub-package daemon/runner",
        "core/test_child.py: names no module of daemon/core",
        "core/test_execute.py: names no module of daemon/core",
        "test_exits.py: names no module of daemon",
    ]


def test_the_unit_tier_mirrors_the_package() -> None:
    assert _unmirrored(TESTS / "unit", PACKAGE, TESTS / SUPPORT) == []
