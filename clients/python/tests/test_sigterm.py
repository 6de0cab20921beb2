"""SIGTERM (a preemption notice) posts the run as preempted, chains, and is restored."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cadence_client import CadenceClient, Spool

CLIENT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def keep_sigterm() -> Iterator[None]:
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def recording() -> tuple[list[dict[str, Any]], httpx.MockTransport]:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("outcome") == "running":  # track_run's start report, posted on entry
            return httpx.Response(201, json={"id": 7, **body})
        bodies.append(body)
        return httpx.Response(201, json={"id": 7, **bodies[-1]})

    return bodies, httpx.MockTransport(handle)


def test_sigterm_posts_a_preempted_run_and_calls_the_previous_handler(keep_sigterm: None) -> None:
    seen: list[int] = []

    def previous(signum: int, _frame: object) -> None:
        seen.append(signum)

    signal.signal(signal.SIGTERM, previous)
    bodies, transport = recording()
    with CadenceClient("http://cadence.test", "cad_x", transport=transport) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="spot-1", workers=4) as run:
            assert signal.getsignal(signal.SIGTERM) != previous  # ours while the run lasts
            signal.raise_signal(signal.SIGTERM)
            assert [b["outcome"] for b in bodies] == ["preempted"]  # posted at once
            assert seen == [signal.SIGTERM]  # then the job's own handler ran
    assert len(bodies) == 1  # the block's end did not post it again
    assert run.outcome == "preempted" and run.result is not None
    assert signal.getsignal(signal.SIGTERM) is previous  # restored


def test_a_run_tracked_outside_the_main_thread_leaves_signals_alone(keep_sigterm: None) -> None:
    before = signal.getsignal(signal.SIGTERM)
    bodies, transport = recording()
    during: list[object] = []

    def job() -> None:
        with CadenceClient("http://cadence.test", "cad_x", transport=transport) as cadence:
            with cadence.track_run(pipeline="ranker", run_id="thread-1", workers=1):
                during.append(signal.getsignal(signal.SIGTERM))

    worker = threading.Thread(target=job)
    worker.start()
    worker.join()
    assert during == [before] and len(bodies) == 1


JOB = """
import sys, time
from cadence_client import CadenceClient
with CadenceClient(sys.argv[1], "cad_x", backoff_base=0.01) as cadence:
    with cadence.track_run(pipeline="ranker", run_id="spot-2", workers=8):
        print("training", flush=True)
        time.sleep(120)
"""


def test_a_real_process_killed_by_sigterm_spools_its_run_then_dies_of_the_signal(
    tmp_path: Path,
) -> None:
    """No handler of its own: the job dies of SIGTERM as it would have without Cadence,
    and the run (the server unreachable) is in the spool, outcome preempted."""
    with socket.socket() as s:  # a free port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CADENCE_SPOOL_DIR": str(tmp_path), "PYTHONPATH": str(CLIENT_ROOT)}
    job = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(JOB), f"http://127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert job.stdout is not None and job.stdout.readline() == "training\n"
        job.send_signal(signal.SIGTERM)
        _out, err = job.communicate(timeout=60)
    finally:
        job.kill()
    assert job.returncode == -signal.SIGTERM, err
    [run] = Spool(tmp_path).pending()
    assert (run["run_id"], run["outcome"], run["workers"]) == ("spot-2", "preempted", 8)
    assert "spooled to" in err


def test_a_sigterm_while_the_finished_run_is_being_posted_waits_for_the_post(
    keep_sigterm: None,
) -> None:
    """SIGTERM in the middle of the block's own post: the post completes (outcome as the
    block ended), then the previous handler gets the signal."""
    seen: list[int] = []

    def previous(signum: int, _frame: object) -> None:
        seen.append(signum)

    signal.signal(signal.SIGTERM, previous)
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        signal.raise_signal(signal.SIGTERM)  # arrives while this post is in flight
        assert seen == []  # not handed on yet: the post is not done
        bodies.append(json.loads(request.content))
        return httpx.Response(201, json={"id": 8, **bodies[-1]})

    transport = httpx.MockTransport(handle)
    with CadenceClient("http://cadence.test", "cad_x", transport=transport) as cadence:
        # No start report: the signal is raised in the block's own post only.
        with cadence.track_run(
            pipeline="ranker", run_id="late-1", workers=1, report_start=False
        ) as run:
            pass
    assert len(bodies) == 1 and "outcome" not in bodies[0]  # succeeded, posted once
    assert run.result is not None and seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is previous
