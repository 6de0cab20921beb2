"""A real Prometheus (Debian's ``prometheus``) scraping a small fake DCGM exporter.

The exporter serves the metric names, HELP texts and labels dcgm-exporter serves (gpu,
UUID, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION and, in Kubernetes, container,
namespace and pod) with constant values, so the mean over any window is the value
served. Prometheus scrapes it every second on a free loopback port; both stop when the
fixture ends. Without the binary the tests skip loudly, and fail in CI (CI=true).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

PROMETHEUS = "/usr/bin/prometheus"
STARTUP_SECONDS = 60  # a bound on waiting for the first scrapes, not a timing assertion
HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", "gauge"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("Ratio of time the graphics engine is active.", "gauge"),
}


@dataclass(frozen=True)
class Gpu:
    pod: str
    gpu: int
    util: float  # DCGM_FI_DEV_GPU_UTIL, percent
    profiling: float | None  # DCGM_FI_PROF_GR_ENGINE_ACTIVE; None: profiling off


def exposition(gpus: list[Gpu]) -> str:
    lines: list[str] = []
    for metric, (text, kind) in HELP.items():
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
        for g in gpus:
            value = g.util if metric == "DCGM_FI_DEV_GPU_UTIL" else g.profiling
            if value is None:
                continue
            labels = (
                f'gpu="{g.gpu}",UUID="GPU-{g.pod}-{g.gpu:04d}",device="nvidia{g.gpu}",'
                f'modelName="NVIDIA A100-SXM4-80GB",Hostname="node-1",'
                f'DCGM_FI_DRIVER_VERSION="535.104.05",container="trainer",namespace="ml",'
                f'pod="{g.pod}"'
            )
            lines.append(f"{metric}{{{labels}}} {value:g}")
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require_prometheus() -> None:
    if shutil.which(PROMETHEUS) or os.path.exists(PROMETHEUS):
        return
    message = f"PROMETHEUS TESTS NOT RUN: {PROMETHEUS} missing (apt-get install prometheus)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true)", pytrace=False)
    pytest.skip(message)


@dataclass
class Stack:
    url: str
    pod: str  # one pod to wait on


@pytest.fixture(scope="module")
def dcgm_prometheus(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    _require_prometheus()
    gpus: list[Gpu] = request.module.GPUS
    body = exposition(gpus).encode()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    exporter = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter.server_port}']}}]\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(work / "prometheus.log").open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_samples(url, gpus[0].pod, process, work / "prometheus.log")
        yield Stack(url, gpus[0].pod)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        exporter.shutdown()


def _wait_for_samples(url: str, pod: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until Prometheus holds three scrapes of the exporter (bounded)."""
    query = f'count_over_time(DCGM_FI_DEV_GPU_UTIL{{pod="{pod}"}}[1m])'
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2)
            result = answer.json()["data"]["result"]
            if result and float(result[0]["value"][1]) >= 3:
                return
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prometheus had no samples after {STARTUP_SECONDS} s")
