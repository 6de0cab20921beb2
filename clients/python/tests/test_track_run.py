"""track_run: timestamps, run.set, posting on success and on failure, NVML sampling."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from cadence_client import CadenceClient, NvmlSampler, ServiceUnavailable, ValidationFailed

BASE = "http://cadence.test"
START = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)


class Server:
    """Records posted runs and answers 201 (or a scripted status)."""

    def __init__(self, status: int = 201) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.status == 422:
            error = {"code": "validation_error", "message": "bad", "fields": []}
            return httpx.Response(422, json={"error": error})
        if self.status >= 500:
            return httpx.Response(self.status, json={"error": {"code": "x", "message": "down"}})
        return httpx.Response(self.status, json={"id": 1, **body})


def ticking(step_hours: float) -> Iterator[datetime]:
    t = START
    while True:
        yield t
        t += timedelta(hours=step_hours)


def client_for(server: Server, **kwargs: Any) -> CadenceClient:
    clock = ticking(14)
    return CadenceClient(
        BASE,
        "cad_x",
        transport=httpx.MockTransport(server),
        now=lambda: next(clock),
        sleep=lambda _s: None,
        **kwargs,
    )


def test_a_tracked_run_records_its_own_start_and_end_and_what_the_job_set() -> None:
    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(
            pipeline="ranker", run_id="r1", workers=8, variant="candidate", tags={"team": "a"}
        ) as run:
            run.set(gpu_utilization=0.71, quality_value=0.43, tags={"commit": "abc"})
            run.add_interruption(lost_progress_hours=0.5, cause="preemption")
        assert run.result is not None and run.result["id"] == 1
    [body] = server.bodies
    assert body["started_at"] == "2026-11-30T08:00:00+00:00"
    assert body["finished_at"] == "2026-11-30T22:00:00+00:00"  # the clock ticked 14 h
    assert body["pipeline"] == "ranker" and body["run_id"] == "r1" and body["workers"] == 8
    assert body["variant"] == "candidate"
    assert (body["gpu_utilization"], body["quality_value"]) == (0.71, 0.43)
    assert body["tags"] == {"team": "a", "commit": "abc"}
    assert body["interruptions"] == [
        {
            "lost_progress_hours": 0.5,
            "resume_hours": 0.0,
            "reschedule_hours": 0.0,
            "cause": "preemption",
        }
    ]


def test_a_failed_job_is_recorded_with_a_tag_and_its_error_re_raised() -> None:
    server = Server()
    with client_for(server) as cadence, pytest.raises(RuntimeError, match="CUDA OOM"):
        with cadence.track_run(
            pipeline="ranker", run_id="r2", workers=4, gpu_utilization=0.2
        ) as run:
            run.tag("commit", "abc")
            raise RuntimeError("CUDA OOM")
    [body] = server.bodies
    assert body["tags"] == {
        "commit": "abc",
        "cadence_outcome": "failed",
        "cadence_error": "RuntimeError",
    }
    assert body["finished_at"] == "2026-11-30T22:00:00+00:00"


def test_a_failed_post_after_a_failed_job_does_not_hide_the_jobs_error() -> None:
    server = Server(status=503)
    with (
        client_for(server, max_attempts=2) as cadence,
        pytest.raises(KeyError),
        cadence.track_run(pipeline="ranker", run_id="r3", workers=1, gpu_utilization=0.5),
    ):
        raise KeyError("batch")
    assert len(server.bodies) == 2  # tried (and retried), then gave way to the job's error


def test_a_failed_job_without_utilization_is_not_posted() -> None:
    server = Server()
    with (
        client_for(server) as cadence,
        pytest.raises(ValueError, match="bad data"),
        cadence.track_run(pipeline="ranker", run_id="r4", workers=1),
    ):
        raise ValueError("bad data")
    assert server.bodies == []


def test_a_successful_job_whose_post_is_refused_raises() -> None:
    server = Server(status=422)
    with client_for(server) as cadence, pytest.raises(ValidationFailed):
        with cadence.track_run(pipeline="ranker", run_id="r5", workers=1) as run:
            run.set(gpu_utilization=0.5)


def test_set_refuses_the_fields_the_tracker_owns() -> None:
    with client_for(Server()) as cadence:
        run = cadence.track_run(pipeline="ranker", run_id="r6", workers=1)
        with pytest.raises(ValueError, match="started_at"):
            run.set(started_at=START)


def test_unavailable_server_on_success_raises_service_unavailable() -> None:
    server = Server(status=503)
    with client_for(server, max_attempts=3) as cadence, pytest.raises(ServiceUnavailable):
        with cadence.track_run(pipeline="ranker", run_id="r7", workers=1) as run:
            run.set(gpu_utilization=0.5)
    assert len(server.bodies) == 3


# NVML ---------------------------------------------------------------------------------


class FakeNvml:
    """The few pynvml calls the sampler makes, with scripted utilization per GPU."""

    class NVMLError(Exception):
        pass

    def __init__(self, readings: list[list[int]] | None = None, fail_init: bool = False) -> None:
        self.readings = readings or []
        self.fail_init = fail_init
        self.calls = 0
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.readings[0]) if self.readings else 0

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        row = self.readings[min(self.calls // self.nvmlDeviceGetCount(), len(self.readings) - 1)]
        self.calls += 1

        class Rates:
            gpu = row[handle]

        return Rates()

    def nvmlShutdown(self) -> None:
        self.shut = True


def test_the_sampler_averages_gpus_and_samples_as_a_fraction() -> None:
    fake = FakeNvml([[40, 60], [80, 100]])
    sampler = NvmlSampler(interval=3600, nvml=fake)  # the thread never wakes in this test
    assert sampler.start() is True
    # start() took the first sample: (40 + 60) / 2 = 50% -> 0.5; stop() takes the second:
    # (80 + 100) / 2 = 90% -> 0.9; the mean of the two is 0.7.
    assert sampler.stop() == pytest.approx(0.7)
    assert sampler.samples == pytest.approx([0.5, 0.9])
    assert fake.shut


def test_without_a_gpu_the_sampler_does_nothing_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for fake, reason in (
        (FakeNvml(fail_init=True), "no GPU found (NVML Shared Library Not Found)"),
        (FakeNvml([]), "no GPU found (NVML sees 0 devices)"),
    ):
        sampler = NvmlSampler(nvml=fake)
        assert sampler.start() is False
        assert sampler.status.startswith(reason)
        assert sampler.stop() is None
    assert "utilization not sampled" in caplog.text


def test_without_the_library_the_sampler_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    sampler = NvmlSampler()
    assert sampler.start() is False
    assert "pip install cadence-client[nvml]" in sampler.status


def test_this_machine_has_no_gpu_so_a_sampled_run_keeps_the_jobs_own_numbers() -> None:
    """The real no-GPU path (no fake): nothing sampled, the run still recorded."""
    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r8", workers=1, sample_gpu=True) as run:
            run.set(gpu_utilization=0.4)
        assert run.sampler is not None and not run.sampler.active
        assert "utilization not sampled" in run.sampler.status
    assert server.bodies[0]["gpu_utilization"] == 0.4
    assert "utilization_source" not in server.bodies[0]


def test_sampled_utilization_fills_the_run_and_names_its_source() -> None:
    from cadence_client.tracking import TrackedRun

    server = Server()
    with client_for(server) as cadence:
        sampler = NvmlSampler(interval=3600, nvml=FakeNvml([[30], [50]]))
        with TrackedRun(
            cadence, {"pipeline": "ranker", "run_id": "r9", "workers": 1}, sampler=sampler
        ):
            pass
    # samples 0.3 (start) and 0.5 (stop): mean 0.4
    assert server.bodies[0]["gpu_utilization"] == pytest.approx(0.4)
    assert server.bodies[0]["utilization_source"] == "nvml_gpu_util"
