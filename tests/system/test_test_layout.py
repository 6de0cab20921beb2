"""The tests' own layout: a test module imports helpers from tests/fixtures/ (or a
conftest), never from another test module, so that moving or deleting one test file
cannot break another."""

from __future__ import annotations

import ast
from pathlib import Path

from app.settings import PROJECT_ROOT

TESTS = PROJECT_ROOT / "tests"


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Every ``tests.…`` module an import names, at any depth (imports inside functions
    too); ``from tests.a import b`` names ``tests.a.b`` as well, in case b is a module."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "tests"]


def module_file(root: Path, name: str) -> Path | None:
    """The file of module ``name`` under ``root`` (the folder that holds ``tests/``)."""
    path = root.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def allowed(root: Path, target: Path) -> bool:
    """tests/fixtures/…, a conftest, or an empty package ``__init__``."""
    relative = target.relative_to(root / "tests")
    if relative.parts[0] == "fixtures" or target.name == "conftest.py":
        return True
    return target.name == "__init__.py" and not target.read_text().strip()


def cross_test_imports(root: Path) -> list[str]:
    problems: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in imported_modules(tree):
            target = module_file(root, name)
            if target is None or target == path or allowed(root, target):
                continue
            where = f"{path.relative_to(root)}:{line}"
            problems.append(f"{where} imports {name} ({target.relative_to(root)})")
    return problems


def test_no_test_module_imports_another() -> None:
    problems = cross_test_imports(PROJECT_ROOT)
    assert not problems, (
        "move what these import to tests/fixtures/<topic>.py (a pytest fixture used in "
        "several directories: tests/conftest.py):\n  " + "\n  ".join(problems)
    )


def test_the_check_finds_an_import_of_a_test_module_and_of_a_helper_beside_it(
    tmp_path: Path,
) -> None:
    tests = tmp_path / "tests"
    (tests / "fixtures").mkdir(parents=True)
    (tests / "alerts").mkdir()
    (tests / "web").mkdir()
    for package in ("", "fixtures", "alerts", "web"):
        (tests / package / "__init__.py").write_text("")
    (tests / "conftest.py").write_text("BACKEND = 'sqlite'\n")
    (tests / "fixtures" / "alerts.py").write_text("def drain(): ...\n")
    (tests / "alerts" / "test_alerts.py").write_text("def drain(): ...\n")
    (tests / "alerts" / "stack.py").write_text("PORT = 1\n")
    (tests / "web" / "test_page.py").write_text(
        "from tests.conftest import BACKEND\n"
        "from tests.fixtures.alerts import drain\n"
        "from tests.fixtures import alerts\n"
        "from tests.alerts import test_alerts\n"
        "def test_x():\n"
        "    from tests.alerts.stack import PORT\n"
        "    import tests.alerts.test_alerts\n"
    )
    assert cross_test_imports(tmp_path) == [
        "tests/web/test_page.py:4 imports tests.alerts.test_alerts (tests/alerts/test_alerts.py)",
        "tests/web/test_page.py:6 imports tests.alerts.stack (tests/alerts/stack.py)",
        "tests/web/test_page.py:7 imports tests.alerts.test_alerts (tests/alerts/test_alerts.py)",
    ]
