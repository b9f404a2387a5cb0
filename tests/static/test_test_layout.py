"""The test tree's layout: each tier (unit, integration, acceptance, container, static) imports
only its own modules and tests/support, and tests/support imports no tier, so a helper two
tiers need has one home and running one tier never loads another's test modules."""

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
