"""One install each: fresh virtualenvs built with plain ``pip install ./clients/python``
(a training image) and ``pip install ./clients/python`` then ``pip install .`` (the
server), and the docs' client example (docs/reporting.md) run from the first as a reader
would paste it.

pip may reuse its cache and the local index; nothing is installed from this tree in
editable mode. The two venvs are built once for the module (the server's takes the
longest: its dependencies are wheels from the cache, nothing is compiled).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.db.engine import Database
from app.main import create_app
from app.settings import PROJECT_ROOT, Settings
from tests.conftest import BACKEND
from tests.fixtures.builders import make_token
from tests.fixtures.serving import serve_in_thread

SERVER_FILES = ("pyproject.toml", "README.md", "alembic.ini")
SERVER_DIRS = ("app", "migrations", "templates", "static")
IGNORE = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache")


# Building the venvs is the same work whatever database the suite runs on (~2.5 min):
# once, in the SQLite pass, which CI always runs.
pytestmark = pytest.mark.skipif(
    BACKEND != "sqlite", reason="the install test runs once, in the SQLite pass"
)


def clean_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("CADENCE_")}


def make_venv(where: Path, *sources: Path) -> Path:
    """A new virtualenv with each source installed by a plain ``pip install``, in order."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    for source in sources:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", str(source)],
            capture_output=True, text=True, env=clean_env(), timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"pip install {source}:\n{done.stderr[-3000:]}"
    return where / "bin"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Copies of the client and the server trees (pip builds in the tree it is given)."""
    root = tmp_path_factory.mktemp("src")
    shutil.copytree(PROJECT_ROOT / "clients" / "python", root / "clients" / "python", ignore=IGNORE)
    for name in SERVER_DIRS:
        shutil.copytree(PROJECT_ROOT / name, root / name, ignore=IGNORE)
    for name in SERVER_FILES:
        shutil.copy2(PROJECT_ROOT / name, root / name)
    return root / "clients" / "python", root


@pytest.fixture(scope="module")
def client_bin(sources: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("client") / "venv", sources[0])


@pytest.fixture(scope="module")
def server_bin(sources: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("server") / "venv", *sources)


def run(bin_dir: Path, *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]],
        capture_output=True, text=True, env={**clean_env(), **(env or {})}, cwd=cwd,
        timeout=timeout, check=False,
    )  # fmt: skip


def readme_example() -> str:
    """The client example of the docs (docs/reporting.md), as a reader would paste it."""
    page = (PROJECT_ROOT / "docs" / "reporting.md").read_text(encoding="utf-8")
    section = page[page.index("## From Python: the `cadence-gpu-client` package") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no Python example in the client section of docs/reporting.md"
    return match.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_client_alone_has_the_pipeline_commands_and_not_the_servers(client_bin: Path) -> None:
    shown = run(client_bin, "cadence", "--help")
    assert shown.returncode == 0, shown.stderr
    for name in ("report", "export", "check", "import", "spool"):
        assert re.search(rf"^\s+{name}\s", shown.stdout, re.M), shown.stdout
    assert not re.search(r"^\s+serve\s", shown.stdout, re.M)
    serve = run(client_bin, "cadence", "serve")
    assert serve.returncode == 2 and "invalid choice: 'serve'" in serve.stderr
    isolated = run(client_bin, "python", "-I", "-c", "import fastapi")
    assert "ModuleNotFoundError" in isolated.stderr  # the server's dependencies stayed out


def test_the_readme_example_records_a_crash_and_a_run_finished_while_the_server_was_down(
    client_bin: Path, committed_db: Database, settings: Settings, tmp_path: Path
) -> None:
    token = make_token(committed_db, "ingest", name="venv-ingest")
    spool = tmp_path / "spool"
    job_env = {"CADENCE_TOKEN": token, "CADENCE_SPOOL_DIR": str(spool)}
    example = readme_example()
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: the server is down
    offline = run(client_bin, "python", "-I", "-c", example, env={**job_env, "CADENCE_URL": dead},
                  cwd=tmp_path)  # fmt: skip
    assert offline.returncode == 0, offline.stderr[-2000:]  # Cadence never fails the job
    assert "server unreachable: kept in " + str(spool) in offline.stdout
    with serve_in_thread(create_app(settings, database=committed_db), "client server") as base:
        live = {**job_env, "CADENCE_URL": base}
        flush = run(client_bin, "cadence", "spool", "flush", env=live)
        assert flush.returncode == 0, flush.stderr
        assert "1 run(s) stored (1 created, 0 already there)" in flush.stdout
        again = run(client_bin, "cadence", "spool", "flush", env=live)
        assert "0 file(s); 0 run(s) stored" in again.stdout
        crash = run(client_bin, "python", "-I", "-c", example, env={**live, "CRASH_AT": "50"},
                    cwd=tmp_path)  # fmt: skip
        assert crash.returncode == 1 and "RuntimeError: CUDA out of memory" in crash.stderr
        check = run(client_bin, "cadence", "check", "--pipeline", "example-job", env=live)
        runs = httpx.get(f"{base}/api/v1/runs", params={"pipeline": "example-job"}).json()
    assert check.returncode == 0, check.stdout + check.stderr
    assert "### Cadence cost check: `example-job`" in check.stdout
    by_outcome: dict[str, list[dict[str, object]]] = {}
    for r in runs["runs"]:
        by_outcome.setdefault(str(r.get("outcome", "succeeded")), []).append(r)
    [finished] = by_outcome["succeeded"]  # the offline run, stored once after two flushes
    assert finished["gpu_utilization"] == 0.38 and finished["quality_value"] == 0.412
    assert finished["data_stall_hours"] > 0 and finished["checkpoint_hours"] > 0
    [failed] = by_outcome["failed"]  # the crash, half-way: paid for, utilization unknown
    assert failed["gpu_utilization"] is None and failed["cost_usd"] > 0
    assert failed["tags"] == {"cadence_error": "RuntimeError"}
    assert failed["data_stall_hours"] > 0  # the 51 steps it waited for before crashing


@pytest.fixture
def served(server_bin: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    env = {**clean_env(), "CADENCE_DATABASE_URL": f"sqlite:///{tmp_path / 'cadence.db'}",
           "CADENCE_PORT": str(port), "CADENCE_HOST": "127.0.0.1", "CADENCE_WORKERS": "1",
           "CADENCE_LOG_LEVEL": "warning"}  # fmt: skip
    migrate = subprocess.run([str(server_bin / "cadence"), "migrate"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    proc = subprocess.Popen(
        [str(server_bin / "cadence"), "serve"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_the_server_install_adds_its_commands_to_the_same_script_and_serves(
    server_bin: Path, served: tuple[str, subprocess.Popen[str]]
) -> None:
    shown = run(server_bin, "cadence", "--help")
    assert shown.returncode == 0, shown.stderr
    for name in ("serve", "migrate", "demo", "token", "report", "check", "spool"):
        assert re.search(rf"^\s+{name}\s", shown.stdout, re.M), shown.stdout
    assert "focus" in run(server_bin, "cadence", "export", "--help").stdout
    base, proc = served
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "cadence serve did not become ready in 60 s"
        time.sleep(0.1)
    page = httpx.get(base + "/", timeout=10)
    assert page.status_code == 200 and "Cadence" in page.text  # templates found when installed
    check = run(server_bin, "cadence", "check", "--pipeline", "none", "--url", base)
    assert check.returncode == 2 and "no pipeline named 'none'" in check.stderr
