"""The cadence-client package against this server: through the app in-process, and from
a fresh virtualenv holding only ``pip install ./clients/python`` against a live server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cadence_client import CadenceClient, ConflictError, ValidationFailed
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.settings import PROJECT_ROOT, Settings
from tests.fixtures.builders import make_run, make_token
from tests.web.browser.support import serve_in_thread

CLIENT_SOURCE = PROJECT_ROOT / "clients" / "python"


def through(app_client: TestClient, statuses: list[int]) -> httpx.MockTransport:
    """A transport that hands each request to the app via FastAPI's TestClient.

    (Starlette's TestClient is not an ``httpx.Client`` the client could be given; this
    bridge keeps CadenceClient on plain httpx.)
    """

    def handle(request: httpx.Request) -> httpx.Response:
        answer = app_client.request(
            request.method, str(request.url), content=request.content, headers=request.headers
        )
        statuses.append(answer.status_code)
        # ``content`` is decoded already: the headers that describe the encoded bytes go.
        headers = [
            (k, v)
            for k, v in answer.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length")
        ]
        return httpx.Response(answer.status_code, headers=headers, content=answer.content)

    return httpx.MockTransport(handle)


def test_against_the_real_app(client: TestClient, db: Database) -> None:
    statuses: list[int] = []
    token = make_token(db, "ingest")
    run = make_run(pipeline="client-test", run_id="client-1")
    transport = through(client, statuses)
    with CadenceClient(
        "http://testserver", token, transport=transport, sleep=pytest.fail
    ) as cadence:
        assert cadence.health() is True
        first = cadence.post_run(run)
        again = cadence.post_run(run)
        assert first["id"] == again["id"]
        assert first["gpu_hours"] == pytest.approx(112)
        assert statuses[-2:] == [201, 200]

        with pytest.raises(ValidationFailed) as info:
            cadence.post_run({**run, "run_id": "client-bad", "gpu_utilization": 38})
        assert info.value.status == 422
        assert info.value.url == "http://testserver/api/v1/runs"
        assert [f["field"] for f in info.value.fields] == ["gpu_utilization"]
        assert "0.38" in info.value.fields[0]["reason"]

        with pytest.raises(ConflictError):
            cadence.post_run({**run, "workers": 16})

        batch = [make_run(pipeline="client-test", run_id=f"client-b{i}") for i in range(3)]
        result = cadence.post_runs([run, *batch], batch_size=2)
        assert (result.created, result.existing, result.batches) == (3, 1, 2)
        assert result.ids[0] == first["id"]

        listed = list(cadence.list_runs(pipeline="client-test", limit=1))
        assert sorted(r["run_id"] for r in listed) == [
            "client-1",
            "client-b0",
            "client-b1",
            "client-b2",
        ]
        assert "client-test" in [p["name"] for p in cadence.list_pipelines()]
    assert statuses.count(422) == 1 and statuses.count(409) == 1  # neither was retried


ISOLATION = """
try:
    import fastapi  # noqa: F401
except ImportError:
    print("no fastapi")
"""


def readme_example() -> str:
    """The docs' Python example (docs/reporting.md), as a reader would paste it."""
    page = (PROJECT_ROOT / "docs" / "reporting.md").read_text(encoding="utf-8")
    section = page[page.index("## From Python: the `cadence-client` package") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no Python example in the client section of docs/reporting.md"
    return match.group(1)


def test_a_fresh_virtualenv_with_only_the_client_records_a_run(
    committed_db: Database, settings: Settings, tmp_path: Path
) -> None:
    """Done-when of issue 15: ``pip install ./clients/python`` in a new virtualenv, then
    the docs' example (one ``with`` block) records a run on a live server. pip may
    reuse its cache; the package index is needed only for httpx and its dependencies."""
    source = tmp_path / "src"
    shutil.copytree(CLIENT_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    token = make_token(committed_db, "ingest", name="venv-ingest")
    with serve_in_thread(create_app(settings, database=committed_db), "client server") as base:
        job = subprocess.run(
            [str(python), "-I", "-c", readme_example()],
            capture_output=True,
            text=True,
            env={**env, "CADENCE_URL": base, "CADENCE_TOKEN": token},
            cwd=tmp_path,
            timeout=120,
        )
        assert job.returncode == 0, job.stderr[-2000:]
        found = re.fullmatch(r"recorded run (\d+) of example-job\n", job.stdout)
        assert found, job.stdout
        stored = httpx.get(f"{base}/api/v1/runs/{found.group(1)}", timeout=10).json()
    isolation = subprocess.run(
        [str(python), "-I", "-c", ISOLATION], capture_output=True, text=True, env=env
    )
    assert isolation.stdout == "no fastapi\n"  # the server's dependencies did not come along
    assert stored["pipeline"] == "example-job" and stored["run_id"].startswith("run-")
    assert stored["gpu_utilization"] == 0.38 and stored["workers"] == 8
    assert stored["utilization_source"] == "dcgm_sm_active"
    assert stored["tags"] == {"git_sha": "4f1c2e9"}
    assert 0.41 <= stored["quality_value"] <= 0.42
    assert stored["finished_at"] > stored["started_at"]
