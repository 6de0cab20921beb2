"""The contracts of ARCHITECTURE.md by role and by allow-list, each with a probe that
shows its checker can fail: a module that declares routes imports no repository,
``app/planning`` imports only pure modules, a function that writes takes a
``WriteSession`` (and mypy refuses a read session there), a package ``__init__`` only
hands names on, and a function over 60 lines says why."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.architecture import (
    APP,
    CLIENT,
    ROOT,
    declares_routes,
    imports,
    init_statements,
    long_functions,
    modules,
    name_of,
    read_session_writes,
    repository_imports,
)

ROUTER_CONTRACT = "routers never import repositories (they call services)"

# What app/planning may import besides itself: the standard library's pure modules (no
# files, network, processes or clock-free state of the machine), numpy and scipy.
PURE_MODULES = frozenset(
    {
        "__future__", "abc", "bisect", "calendar", "cmath", "collections", "dataclasses",
        "datetime", "decimal", "enum", "fractions", "functools", "heapq", "itertools", "math",
        "numbers", "operator", "random", "re", "statistics", "string", "typing",
        "numpy", "scipy",
    }
)  # fmt: skip


def probe(tmp_path: Path, source: str, name: str = "probe.py") -> Path:
    """``source`` as a module of a package ``app`` under ``tmp_path``."""
    path = tmp_path / "app" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def route_modules() -> set[str]:
    return {name_of(p) for p in modules() if declares_routes(p)}


def test_routers_never_import_repositories() -> None:
    routers = {p: repository_imports(p) for p in modules() if declares_routes(p)}
    assert {name_of(p): found for p, found in routers.items() if found} == {}, (
        "a module that declares routes calls a service; move the query behind one"
    )
    names = {name_of(p) for p in routers}
    assert {"app.assets", "app.web.review"} <= names  # routers not named router.py


def test_the_import_contract_names_every_router() -> None:
    """pyproject's contract lists the same modules, so lint-imports checks them too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"] == ROUTER_CONTRACT]
    patterns = [re.compile(p.replace(".", r"\.").replace("*", r"[^.]+") + "$")
                for p in contract["source_modules"]]  # fmt: skip
    named = {name_of(p) for p in modules() if any(r.match(name_of(p)) for r in patterns)}
    assert named == route_modules()


@pytest.mark.parametrize(
    ("source", "routes", "repositories"),
    [
        ("from fastapi import APIRouter\nfrom app.runs import repository\nr = APIRouter()\n", 1, 1),
        ("def install(app):\n    app.add_api_route('/x', f)\n", 1, 0),
        ("@pages.post('/x')\ndef f():\n    from app.db import sql\n", 1, 1),
        ("from app.runs import service\nfrom app.alerts.repository import rules_of\n", 0, 1),
    ],
)
def test_the_router_checker(tmp_path: Path, source: str, routes: int, repositories: int) -> None:
    path = probe(tmp_path, source)
    assert declares_routes(path) == bool(routes)
    assert len(repository_imports(path, root=tmp_path / "app")) == repositories


def impure_imports(path: Path, root: Path = APP) -> list[str]:
    planning = f"{root.name}.planning"
    return sorted(
        {
            f"line {line}: {module}"
            for line, module in imports(path, root)
            if module.split(".")[0] not in PURE_MODULES
            and not (module == planning or module.startswith(f"{planning}."))
        }
    )


def test_planning_imports_only_pure_modules() -> None:
    offenders = {
        name_of(p): found for p in modules(APP / "planning") if (found := impure_imports(p))
    }
    assert offenders == {}, "app/planning is arithmetic: no I/O, nothing else of the app"


def test_the_planning_checker(tmp_path: Path) -> None:
    source = (
        "import math\nfrom collections.abc import Sequence\nimport numpy as np\n"
        "from app.planning.model import Plan\nfrom . import welch\n"
        "import urllib.request\nimport app.spreadsheet\n"
        "def f():\n    import os\n    from pathlib import Path\n"
    )
    path = probe(tmp_path, source, "planning/model.py")
    assert sorted(f.split(": ")[1] for f in impure_imports(path, tmp_path / "app")) == [
        "app.spreadsheet", "os", "pathlib", "pathlib.Path", "urllib.request",
    ]  # fmt: skip


def test_every_function_that_writes_takes_a_write_session() -> None:
    # app/db/engine.py makes the two kinds: its unit of work commits whichever it opened.
    offenders = {
        name_of(p): found
        for p in modules()
        if p != APP / "db" / "engine.py" and (found := read_session_writes(p))
    }
    assert offenders == {}, "type the session WriteSession (app.db.engine)"


def test_the_writer_checker(tmp_path: Path) -> None:
    source = """
def adds(session: Session, row): session.add(row)
def updates(session: ReadSession): session.execute(update(Run).values(x=1))
def upserts(s: orm.Session): s.execute(pg_insert(Run).on_conflict_do_nothing())
def reads(session: Session): return session.execute(select(Run))
def writes(session: WriteSession, row): session.add(row); session.flush()
def other(rows: list, session: Session): rows.append(1); return session.scalars(select(Run))
def _built(): return insert(Run).from_select([], select(Run))
def through_a_helper(session: Session | Connection): session.execute(_built())
"""
    found = read_session_writes(probe(tmp_path, source))
    assert [f.split(" ")[0] for f in found] == ["adds", "updates", "upserts", "through_a_helper"]


MYPY_PROBE = """
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.rollup import count_changes


def through_a_write_session(db: Database) -> None:
    with db.write() as session:
        count_changes(session, [1])


def through_a_read_session(db: Database) -> None:
    with db.read() as session:
        count_changes(session, [1])  # line 15


def through_a_bare_session(session: Session) -> None:
    count_changes(session, [1])  # line 19
"""


def test_mypy_refuses_a_write_through_a_read_session(tmp_path: Path) -> None:
    """One mypy run with the app's configuration (the cache of ``make lint`` keeps it to a
    few seconds): a writer of app/ called with each kind of session."""
    path = tmp_path / "probe.py"
    path.write_text(MYPY_PROBE)
    command = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", str(path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert [(e.split(":")[1], e.split('incompatible type "')[1].split('"')[0]) for e in errors] == [
        ("15", "ReadSession"),
        ("19", "Session"),
    ], result.stdout
    assert all('expected "WriteSession"' in e for e in errors)


@pytest.mark.parametrize("root", [APP, CLIENT], ids=["app", "cadence_client"])
def test_package_inits_only_hand_names_on(root: Path) -> None:
    offenders = {
        name_of(p, root): found
        for p in modules(root)
        if p.name == "__init__.py" and (found := init_statements(p))
    }
    assert offenders == {}, "an __init__ holds a docstring, imports and __all__: move the rest"


def test_the_init_checker(tmp_path: Path) -> None:
    source = (
        '"""The package."""\nfrom __future__ import annotations\nfrom a import b\n'
        "__all__ = ['b']\nLIMIT = 1\ndef install(app): ...\nb.env.globals['x'] = b\n"
    )
    found = init_statements(probe(tmp_path, source, "__init__.py"))
    assert [f.split(":")[0] for f in found] == ["line 5", "line 6", "line 7"]


def test_no_function_is_over_60_lines_without_a_reason() -> None:
    found = {f for root in (APP, CLIENT) for p in modules(root) for f in long_functions(p)}
    assert sorted(found) == [], (
        "split these functions, or say why on the line above the def: '# Over 60 lines because ...'"
    )


def test_the_long_function_checker(tmp_path: Path) -> None:
    def function(name: str, lines: int, above: str = "") -> str:
        body = "".join(f"    x = {n}\n" for n in range(lines - 1))
        return f"{above}@decorated\ndef {name}():\n{body}\n"

    source = (
        function("long", 61)
        + function("explained", 61, "# Over 60 lines because one table reads best whole\n")
        + function("short", 60)
    )
    assert long_functions(probe(tmp_path, source), root=tmp_path) == ["app/probe.py:long"]
