"""The rules of ARCHITECTURE.md that import contracts cannot express.

``lint-imports`` (run by ``make lint``) checks who may import whom. These tests read
the source of ``app/`` and check the rest: queries only in repositories and ``app/db``,
modules under 400 lines, no copied blocks, and no import cycle between modules.
"""

from __future__ import annotations

import ast
import hashlib
from collections import defaultdict
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
MAX_LINES = 400
BLOCK = 6  # identical lines in a row that count as a copied block

# Building or running a statement is a query; adding, flushing or deleting ORM objects
# in a unit of work is not (services may do that).
SQL_NAMES = frozenset({"select", "insert", "update", "delete", "text", "func", "union", "exists"})
SQL_CALLS = frozenset({"execute", "scalar", "scalars", "query", "exec_driver_sql"})


def modules() -> list[Path]:
    return sorted(p for p in APP.rglob("*.py") if "__pycache__" not in p.parts)


def name_of(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def may_query(path: Path) -> bool:
    return path.name == "repository.py" or path.relative_to(APP).parts[0] == "db"


def queries_in(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            names = {a.name for a in node.names}
            if node.module == "sqlalchemy" and names & SQL_NAMES:
                found.append(f"line {node.lineno}: imports {sorted(names & SQL_NAMES)}")
            if node.module.startswith("sqlalchemy.dialects"):
                found.append(f"line {node.lineno}: imports {node.module}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
            and "session" in ast.unparse(node.func.value).lower()
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
    return found


def test_queries_live_only_in_repositories_and_app_db() -> None:
    offenders = {
        str(p.relative_to(APP.parent)): q
        for p in modules()
        if not may_query(p) and (q := queries_in(p))
    }
    assert offenders == {}, "move these queries into the feature's repository.py"


def test_the_checker_sees_a_query() -> None:
    source = "from sqlalchemy import select\ndef f(session):\n    return session.scalar(1)\n"
    probe = APP.parent / "tests" / "system" / "_probe_query.py"
    probe.write_text(source)
    try:
        assert len(queries_in(probe)) == 2
    finally:
        probe.unlink()


def feature_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def test_features_reach_other_features_only_through_their_services() -> None:
    """A repository is its own feature's: another feature calls that feature's service."""
    paths = modules()
    known = {name_of(p) for p in paths}
    crossing = sorted(
        f"{name_of(p)} -> {target}"
        for p in paths
        for target in module_imports(p, known, top_level_only=False)
        if target.endswith(".repository") and feature_of(target) != feature_of(name_of(p))
    )
    assert crossing == []


def test_no_module_in_app_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(APP.parent)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (at most {MAX_LINES} lines)"


def normalised(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines that carry code: stripped, blank and comment
    lines, docstring-free punctuation-only lines (``)``, ``]``) left out."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#") or not any(c.isalnum() for c in text):
            continue
        if text.startswith(("from ", "import ")):  # import lists repeat by nature
            continue
        out.append((number, text))
    return out


def copied_blocks(paths: list[Path], root: Path = APP.parent) -> list[list[str]]:
    """Groups of places where the same BLOCK normalised lines appear."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        lines = normalised(path)
        for i in range(len(lines) - BLOCK + 1):
            window = lines[i : i + BLOCK]
            digest = hashlib.sha1("\n".join(t for _, t in window).encode()).hexdigest()
            seen[digest].append(f"{path.relative_to(root)}:{window[0][0]}")
    return [places for places in seen.values() if len(places) > 1]


def test_no_block_of_six_lines_is_repeated_in_app() -> None:
    assert copied_blocks(modules()) == [], "factor the repeated block into one function"


def test_the_duplicate_checker_finds_a_copy(tmp_path: Path) -> None:
    body = "".join(f"    total = total + {n}\n" for n in range(BLOCK))  # 6 lines
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(f"def f(total):\n{body}")
    # c.py shares five of those lines: fewer than a block, not a copy.
    (tmp_path / "c.py").write_text("def g(total):\n" + body.split("\n", 1)[1])
    blocks = copied_blocks(sorted(tmp_path.glob("*.py")), root=tmp_path)
    # 7 lines in a and b: the windows starting at line 1 and at line 2
    assert sorted(sorted(b) for b in blocks) == [["a.py:1", "b.py:1"], ["a.py:2", "b.py:2"]]


def module_imports(path: Path, known: set[str], top_level_only: bool = True) -> set[str]:
    """App modules that ``path`` imports. ``top_level_only``: those imported when it is
    executed (not the lazy imports inside functions nor ``if TYPE_CHECKING:`` blocks)."""
    package = name_of(path) if path.name == "__init__.py" else name_of(path).rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in known:
                    out.add(target)
                elif base in known:
                    out.add(base)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules() -> None:
    paths = modules()
    known = {name_of(p) for p in paths}
    graph = {name_of(p): module_imports(p, known) for p in paths}
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected
