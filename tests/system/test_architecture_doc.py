"""ARCHITECTURE.md stays true: every path it names exists, its tree names every package
and top-level module of ``app/`` and every module of each package, and its list of
layers is the one ``lint-imports`` checks (pyproject.toml). And what the code's own
words cite is there: every ``app.x.y`` in backticks is a module of app/ (or a name in
one), and every ``*.md`` is a file of the repository (not a note kept elsewhere)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.architecture import APP, CLIENT, ROOT, modules, name_of

DOC = ROOT / "ARCHITECTURE.md"
PATH = re.compile(r"(?<![\w./-])((?:app|tests|docs|bench)/[\w/*.-]*[\w*/])")
ENTRY = re.compile(r"^  (\S+?)(/|\.py)\s")  # "  name.py   what it is" or "  name/   ..."
CITED_MODULE = re.compile(r"`(app(?:\.\w+)+)")
CITED_DOCUMENT = re.compile(r"(?<![\w/.-])([\w/.-]*\w\.md)\b")
DOCUMENT_DIRS = (ROOT, ROOT / "docs", ROOT / "clients" / "python")
APP_STATE = "app.state"  # the FastAPI application's state, not a module


@dataclass(frozen=True)
class Entry:
    name: str
    package: bool
    text: str  # its description, continuation lines included


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Paths under app/, tests/, docs/ or bench/ the text names that do not exist."""
    found = {match.rstrip(".") for match in PATH.findall(text)}
    return sorted(p for p in found if not any(root.glob(p.rstrip("/"))))


def tree_of(text: str) -> list[Entry]:
    """The entries under ``app/`` in the first code block after "## The tree"."""
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    lines = block.splitlines()
    start = lines.index("app/") + 1
    entries: list[list[str]] = []
    for line in lines[start:]:
        if line and not line.startswith(" "):  # the next top-level directory
            break
        if match := ENTRY.match(line):
            entries.append([match[1], match[2], line[match.end() :]])
        elif entries:
            entries[-1][2] += " " + line.strip()
    return [Entry(name, kind == "/", text) for name, kind, text in entries]


def tree_problems(text: str, app: Path = APP) -> list[str]:
    entries = {e.name: e for e in tree_of(text)}
    problems = [f"{name}: not in app/" for name in entries if not _exists(app, entries[name])]
    top = {p.stem for p in app.glob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.name for p in app.glob("*/__init__.py")}
    problems += [f"{name}: not in the tree" for name in sorted((top | packages) - set(entries))]
    for name in sorted(packages & set(entries)):
        words = set(re.findall(r"[\w]+", entries[name].text))
        modules = {p.stem for p in (app / name).glob("*.py") if p.name != "__init__.py"}
        problems += [f"{name}/{m}.py: not named" for m in sorted(modules - words)]
        named = set(re.findall(r"(?<![\w/])(\w+)\.py", entries[name].text))
        problems += [f"{name}/{m}.py: named, not there" for m in sorted(named - modules)]
    return problems


def _exists(app: Path, entry: Entry) -> bool:
    return (
        (app / entry.name / "__init__.py").exists()
        if entry.package
        else (app / f"{entry.name}.py").exists()
    )


def test_every_path_the_document_names_exists() -> None:
    assert missing_paths(DOC.read_text()) == []


def test_the_tree_names_every_module_of_app() -> None:
    assert tree_problems(DOC.read_text()) == []


def test_the_layers_are_the_contract() -> None:
    text = DOC.read_text()
    sentence = text.split("from the top:", 1)[1].split("A feature may", 1)[0]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    assert re.findall(r"`([^`]+)`", sentence) == layers


def unknown_modules(text: str, known: set[str]) -> list[str]:
    """``app.x.y`` names in backticks of which no prefix (two parts or more) is a module."""
    return sorted(
        {
            cited
            for cited in CITED_MODULE.findall(text)
            if not cited.startswith(APP_STATE)
            and not any(
                ".".join(cited.split(".")[:n]) in known for n in range(2, cited.count(".") + 2)
            )
        }
    )


def missing_documents(text: str, dirs: tuple[Path, ...] = DOCUMENT_DIRS) -> list[str]:
    return sorted(
        {d for d in CITED_DOCUMENT.findall(text) if not any((r / d).exists() for r in dirs)}
    )


def test_what_the_code_cites_is_in_the_repository() -> None:
    known = {name_of(p) for p in modules()}
    sources = [p for root in (APP, CLIENT) for p in modules(root)]
    cited = {str(p.relative_to(ROOT)): p.read_text() for p in sources}
    cited["ARCHITECTURE.md"] = DOC.read_text()
    assert {
        path: found for path, text in cited.items() if (found := unknown_modules(text, known))
    } == {}
    assert {path: found for path, text in cited.items() if (found := missing_documents(text))} == {}


def test_the_citation_checkers(tmp_path: Path) -> None:
    text = (
        "See ``app.runs.service.ingest``, ``app.web.review_data`` and ``app.state.db``;\n"
        "the working is in methodology.md §2 and DOMAIN.md section 9.\n"
    )
    assert unknown_modules(text, {"app.runs.service"}) == ["app.web.review_data"]
    (tmp_path / "methodology.md").write_text("")
    assert missing_documents(text, (tmp_path,)) == ["DOMAIN.md"]


def test_the_document_checkers(tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "feature").mkdir(parents=True)
    for name in ("__init__.py", "router.py", "service.py"):
        (app / "feature" / name).write_text("")
    (app / "main.py").write_text("")
    (app / "server.py").write_text("")
    doc = (
        "The rule is in `app/feature/router.py` and app/feature/gone.py.\n\n"
        "## The tree\n\n```\napp/\n  main.py   the app\n  feature/  its router,\n"
        "            and flows.py\nclients/  other\n```\n"
    )
    assert missing_paths(doc, root=tmp_path) == ["app/feature/gone.py"]
    assert tree_problems(doc, app=app) == [
        "server: not in the tree",
        "feature/service.py: not named",
        "feature/flows.py: named, not there",
    ]
