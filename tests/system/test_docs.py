"""The documentation's shell examples run, against a real server, as a reader would.

Every ```bash block of every page in docs/ runs, in order, one bash process per page
(``set -euo pipefail``: a failing command fails the page), against a live server on a
free loopback port with a fresh SQLite database holding the demo pipelines. The page's
``http://127.0.0.1:8000`` becomes that server, ``cadence`` is this venv's, and ``curl``
fails on an HTTP error. A block that cannot run here has ``<!-- docs-test: skip
(reason) -->`` on the line before its opening fence (docs/contributing.md). The demo
pipelines must come out of every page as they went in: examples write into
``example-job``.

Runs in the SQLite pass only (marker ``docs``; ``make test-postgres`` deselects it): its
database is its own, whatever the backend.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command

from app.db.engine import Database, make_engine
from app.db.revision import alembic_config
from app.demo import load_demo
from app.main import create_app
from app.settings import PROJECT_ROOT, Settings
from tests.fixtures.serving import serve_in_thread

pytestmark = pytest.mark.docs

DOCS = PROJECT_ROOT / "docs"
README = PROJECT_ROOT / "README.md"
DOCUMENTED_URL = "http://127.0.0.1:8000"
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\(([^)]+)\)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
DEMO_PIPELINES = ("recsys-ranker", "fraud-detector")
PRELUDE = """set -euo pipefail
# An HTTP error fails the example, as it would fail a reader.
curl() { command curl --fail-with-body --silent --show-error "$@"; }
"""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str
    skip_reason: str | None


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the skip mark of the line before each."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, language = opening.group(1), opening.group(2)
        before = lines[i - 1] if i else ""
        mark = SKIP.search(before)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        found.append(
            Block(path.name, i + 1, language, "\n".join(body), mark.group(1) if mark else None)
        )
        i = j + 1
    return found


def runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.language == "bash" and b.skip_reason is None]


SOURCES = [README, *sorted(DOCS.glob("*.md"))]
PAGES = [p for p in SOURCES if runnable(p)]


def test_the_docs_have_runnable_examples() -> None:
    # The test below is parametrised by page: an empty list would pass by running nothing.
    assert {p.name for p in PAGES} >= {"README.md", "reporting.md", "planning-api.md"}


def test_a_skipped_block_says_why() -> None:
    for page in SOURCES:
        text = page.read_text(encoding="utf-8")
        marks = len(re.findall(r"docs-test:", text))
        assert marks == len(SKIP.findall(text)), f"{page.name}: a docs-test mark without reason"


@pytest.fixture
def docs_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path / 'docs.db'}"
    command.upgrade(alembic_config(url), "head")
    # No alert sender: the alerts page's webhook must never leave this machine.
    settings = Settings(database_url=url, log_level="warning", alert_sender=False)
    db = Database(make_engine(settings))
    try:
        with db.write() as session:
            load_demo(session)
    finally:
        db.dispose()
    with serve_in_thread(create_app(settings), "docs server") as base:
        yield base, url


def demo_state(base: str) -> dict[str, Any]:
    """What a manager sees of the demo pipelines: their settings and run counts."""
    with httpx.Client(base_url=base, timeout=30) as client:
        listing = client.get("/api/v1/pipelines").json()
    rows = listing["pipelines"] if isinstance(listing, dict) else listing
    return {row["name"]: row for row in rows if row["name"] in DEMO_PIPELINES}


def run_as_reader(
    blocks_: list[Block], docs_server: tuple[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    base, database_url = docs_server
    script = PRELUDE + "\n".join(
        f"# {b.page}:{b.line}\n{b.text.replace(DOCUMENTED_URL, base)}" for b in blocks_
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CADENCE_", "MLFLOW_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CADENCE_DATABASE_URL"] = database_url
    # `source .venv/bin/activate`, as the README says, finds this venv.
    (cwd / ".venv").symlink_to(Path(sys.prefix))
    bash = shutil.which("bash")
    assert bash, "bash is needed to run the docs' examples"
    return subprocess.run(
        [bash, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_an_example_that_gets_an_http_error_fails(
    docs_server: tuple[str, str], tmp_path: Path
) -> None:
    # The harness itself: a 404 stops the page (curl --fail-with-body under set -e), and
    # the commands after it do not run.
    bad = Block(
        "self-test", 1, "bash", f"curl {DOCUMENTED_URL}/api/v1/runs/987654\necho after", None
    )
    done = run_as_reader([bad], docs_server, tmp_path)
    assert done.returncode == 22 and "after" not in done.stdout, done
    assert "not_found" in done.stdout  # --fail-with-body still shows the error body


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_shell_examples_run(page: Path, docs_server: tuple[str, str], tmp_path: Path) -> None:
    base = docs_server[0]
    before = demo_state(base)
    assert set(before) == set(DEMO_PIPELINES)
    done = run_as_reader(runnable(page), docs_server, tmp_path)
    assert done.returncode == 0, (
        f"{page.name}: exit {done.returncode}\n--- stdout\n{done.stdout[-4000:]}"
        f"\n--- stderr\n{done.stderr[-4000:]}"
    )
    assert demo_state(base) == before, f"{page.name} changed a demo pipeline"


def test_one_spelling_of_the_command() -> None:
    # `cadence` after activating the venv, said once per page; never `.venv/bin/cadence`
    # in an example, which would make two spellings of the same command.
    for source in SOURCES:
        for block in blocks(source):
            assert ".venv/bin/cadence" not in block.text, f"{source.name}:{block.line}"


def test_demo_names_are_the_real_ones() -> None:
    for source in SOURCES:
        assert "fraud-scorer" not in source.read_text(encoding="utf-8"), source.name


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 500
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (PROJECT_ROOT / target).exists(), f"README.md links to missing {target}"


def test_the_site_starts_with_getting_started_and_searches_from_disk() -> None:
    """Issue 35 item 7: a getting-started page, and search that works when the built site
    is opened from files (Material's offline plugin inlines the search index)."""
    import yaml

    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["nav"][1] == {"Getting started": "getting-started.md"}
    assert "offline" in config["plugins"] and config["use_directory_urls"] is False
    page = (PROJECT_ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert "--rotate" in page and "pip install ./clients/python ." in page
    assert "site/index.html" in page and "http.server" in page
