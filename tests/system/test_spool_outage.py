"""A run finished while the server is down is spooled, and stored exactly once after the
server comes back and the spool is flushed (twice, as a retried CI step would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cadence_client import CadenceClient, Spool
from cadence_client.cli import main as cadence

from app.settings import PROJECT_ROOT
from tests.fixtures.serving import free_port


class Server:
    """`cadence serve` in a subprocess on its own SQLite file, on a fixed port so that a
    restarted server answers where the first one did."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CADENCE_")}
        self.env.update(
            CADENCE_DATABASE_URL=f"sqlite:///{root / 'cadence.db'}",
            CADENCE_HOST="127.0.0.1",
            CADENCE_PORT=str(self.port),
            CADENCE_WORKERS="1",
            CADENCE_LOG_LEVEL="warning",
        )
        self.log = root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cli("migrate")
        self.token = self.cli("token", "create", "--name", "job", "--scope", "ingest")
        self.token = self.token.strip().splitlines()[-1]

    def cli(self, *argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *argv],
            cwd=PROJECT_ROOT, env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve"],
                cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not become ready in 60 s"
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, as when a node dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    try:
        yield s
    finally:
        s.kill()


def test_a_run_finished_while_the_server_is_down_is_stored_once_after_the_flush(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool = Spool(tmp_path / "spool")
    server.start()
    server.kill()
    cadence_client = CadenceClient(server.url, server.token, max_attempts=2, sleep=lambda _s: None)
    with (
        cadence_client as c,
        c.track_run(pipeline="outage-job", run_id="r1", workers=4, spool=spool) as run,
    ):
        run.set(gpu_utilization=0.5)
    assert run.result is None and run.spooled is not None  # the job went on
    [kept] = spool.pending()
    assert kept["run_id"] == "r1"

    server.start()
    argv = ["spool", "flush", "--url", server.url, "--token", server.token, "--dir"]
    assert cadence([*argv, str(spool.directory)]) == 0
    assert "1 run(s) stored (1 created, 0 already there)" in capsys.readouterr().out
    # The flush's answer lost, say: the file put back and flushed again is no second row.
    spool.write([kept])
    assert cadence([*argv, str(spool.directory)]) == 0
    assert "1 run(s) stored (0 created, 1 already there)" in capsys.readouterr().out
    assert spool.files() == []
    runs = httpx.get(server.url + "/api/v1/runs", params={"pipeline": "outage-job"}).json()
    assert [r["run_id"] for r in runs["runs"]] == ["r1"]
    assert runs["runs"][0]["workers"] == 4 and runs["runs"][0]["gpu_utilization"] == 0.5
