"""Queries never call up (ARCHITECTURE.md, rules 2 and 4): a repository or an ``app/db``
module imports no service or flow, and none of its functions takes a callable, the way
a service would hand it a callback (``ensure_pipelines(..., before_create=...)`` did).
The flow or the service orders the steps; a repository only runs statements.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fixtures.architecture import APP, modules, name_of

# Functions that take a callable and are no callback: a decorator wraps the very
# function it decorates (a read memoised per session), and a kept map or a request's
# memo calls ``make`` only to make the value it keeps when it has none (app/db/kept.py,
# app/db/memo.py's once_per_read_session): none calls another layer of its own accord.
DECORATORS = frozenset(
    {"app.db.memo.per_session", "app.db.memo.per_read_session"}
    | {"app.db.memo.once_per_read_session"}
    | {f"app.db.kept.{f}" for f in ("get", "get_from", "_get", "get_many")}
)
UPPER = ("service", "flows")  # modules whose logic sits above the queries


def is_query_module(path: Path) -> bool:
    return path.name == "repository.py" or path.parent.name == "db"


def services_imported(path: Path) -> list[str]:
    """The service and flow modules ``path`` imports, lazily or not (app/ has no
    relative imports)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return sorted(m for m in found if m.startswith("app.") and m.rpartition(".")[2] in UPPER)


def callable_parameters(path: Path, module: str) -> list[str]:
    """``function(parameter)`` for each parameter annotated as a callable."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if f"{module}.{node.name}" in DECORATORS:
            continue
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            annotation = arg.annotation if arg is not None else None
            if annotation is not None and "Callable" in ast.unparse(annotation):
                found.append(f"{node.name}({arg.arg})")
    return found


def test_no_repository_imports_a_service() -> None:
    offenders = {
        str(p.relative_to(APP.parent)): found
        for p in modules()
        if is_query_module(p) and (found := services_imported(p))
    }
    assert offenders == {}, "a repository answers its service; it never calls one"


def test_no_repository_function_takes_a_callable() -> None:
    offenders = {
        str(p.relative_to(APP.parent)): found
        for p in modules()
        if is_query_module(p) and (found := callable_parameters(p, name_of(p)))
    }
    assert offenders == {}, "run the step in the flow or service, not as a callback"


def test_the_checks_see_a_callback(tmp_path: Path) -> None:
    probe = tmp_path / "db" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(
        "from collections.abc import Callable\n"
        "from app.pipelines import service\n"
        "def ensure(session, names, *, before: Callable[[list[str]], None] | None) -> None:\n"
        "    from app.runs.flows import store_runs\n"
    )
    assert is_query_module(probe)
    assert services_imported(probe) == ["app.pipelines.service", "app.runs.flows"]
    assert callable_parameters(probe, "app.db.probe") == ["ensure(before)"]
    assert callable_parameters(APP / "db" / "memo.py", "app.db.memo") == []
