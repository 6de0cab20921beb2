"""The rules of ARCHITECTURE.md that import contracts cannot express.

``lint-imports`` (run by ``make lint``) checks who may import whom. These tests read
the source of ``app/`` and check the rest: queries only in repositories and ``app/db``,
modules under 400 lines, no copied blocks, and no import circle in ``app/`` or the
client. The contracts by role (routers, planning, sessions, package ``__init__``s, long
functions) are in test_architecture_contracts.py; the readers of the source in
tests/fixtures/architecture.py.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.fixtures.architecture import (
    APP,
    CLIENT,
    cycles,
    import_graph,
    imports,
    modules,
    name_of,
    queries_in,
)

MAX_LINES = 400
BLOCK = 6  # identical lines in a row that count as a copied block


def may_query(path: Path) -> bool:
    return path.name == "repository.py" or path.relative_to(APP).parts[0] == "db"


def test_queries_live_only_in_repositories_and_app_db() -> None:
    offenders = {
        str(p.relative_to(APP.parent)): q
        for p in modules()
        if not may_query(p) and (q := queries_in(p))
    }
    assert offenders == {}, "move these queries into the feature's repository.py"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from sqlalchemy import select\ndef f(session):\n    return session.scalar(1)\n", 2),
        ("import sqlalchemy as sa\nq = sa.select(1)\n", 1),
        ("import sqlalchemy\nq = sqlalchemy.func.count()\n", 1),
        ("from sqlalchemy import select as s\n", 1),
        ("from sqlalchemy import sql\nq = sql.expression.text('1')\n", 1),
        ("import sqlalchemy.dialects.postgresql\n", 1),
        ("from sqlalchemy.dialects import postgresql\n", 1),
        ("from sqlalchemy import dialects\n", 1),
        ("from sqlalchemy.orm import Session\nfrom sqlalchemy.exc import DBAPIError\n", 0),
    ],
)
def test_the_checker_sees_a_query(tmp_path: Path, source: str, found: int) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert len(queries_in(probe)) == found, queries_in(probe)


def feature_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def test_features_reach_other_features_only_through_their_services() -> None:
    """A repository is its own feature's: another feature calls that feature's service."""
    crossing = sorted(
        f"{name_of(p)} -> {target}"
        for p in modules()
        for _, target in imports(p)
        if target.startswith("app.")
        and target.endswith(".repository")
        and feature_of(target) != feature_of(name_of(p))
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


@pytest.mark.parametrize("root", [APP, CLIENT], ids=["app", "cadence_client"])
def test_no_import_circle(root: Path) -> None:
    assert cycles(import_graph(root)) == []


def test_the_circle_finder_sees_a_package_imported_by_its_own_module(tmp_path: Path) -> None:
    """The circle app/security had: the package's ``__init__`` imports ``gate``, which
    imports a sibling through the package (``from pkg import signing``)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.gate import Gate\n")
    (package / "gate.py").write_text("from pkg import signing\nclass Gate: ...\n")
    (package / "signing.py").write_text("import hmac\n")
    assert cycles(import_graph(package)) == [["pkg", "pkg.gate"]]
    (package / "__init__.py").write_text('"""Only a docstring."""\n')
    assert cycles(import_graph(package)) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected
