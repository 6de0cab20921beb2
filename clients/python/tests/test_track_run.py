"""track_run: timestamps, run.set, posting on success and on failure, NVML sampling."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from cadence_client import (
    CadenceClient,
    NvmlSampler,
    ServiceUnavailable,
    Spool,
    ValidationFailed,
)

BASE = "http://cadence.test"
START = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)


class Server:
    """Records posted runs and answers 201 (or a scripted status)."""

    def __init__(self, status: int = 201) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.starts: list[dict[str, Any]] = []  # start reports (outcome "running")

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        (self.starts if body.get("outcome") == "running" else self.bodies).append(body)
        if self.status == 422:
            error = {"code": "validation_error", "message": "bad", "fields": []}
            return httpx.Response(422, json={"error": error})
        if self.status >= 500:
            return httpx.Response(self.status, json={"error": {"code": "x", "message": "down"}})
        return httpx.Response(self.status, json={"id": 1, **body})


class BatchServer:
    """Stores runs once by (pipeline, run_id), like Cadence: single posts and batches."""

    def __init__(self) -> None:
        self.singles: list[dict[str, Any]] = []
        self.batched: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/batch"):
            self.batched += body["runs"]
            items = [
                {"index": i, "id": i + 1, "status": "created", **r}
                for i, r in enumerate(body["runs"])
            ]
            return httpx.Response(200, json={"created": len(items), "existing": 0, "runs": items})
        self.singles.append(body)
        return httpx.Response(201, json={"id": 1, **body})


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


def test_a_failed_job_is_recorded_as_failed_and_its_error_re_raised() -> None:
    server = Server()
    with client_for(server) as cadence, pytest.raises(RuntimeError, match="CUDA OOM"):
        with cadence.track_run(
            pipeline="ranker", run_id="r2", workers=4, gpu_utilization=0.2
        ) as run:
            run.tag("commit", "abc")
            raise RuntimeError("CUDA OOM")
    [body] = server.bodies
    assert body["outcome"] == "failed"
    assert body["tags"] == {"commit": "abc", "cadence_error": "RuntimeError"}
    assert body["finished_at"] == "2026-11-30T22:00:00+00:00"  # its 14 h are paid for
    assert run.outcome == "failed"


def test_a_job_that_crashes_before_it_knows_its_utilization_is_recorded_without_it() -> None:
    server = Server()
    with (
        client_for(server) as cadence,
        pytest.raises(ValueError, match="bad data"),
        cadence.track_run(pipeline="ranker", run_id="r4", workers=2),
    ):
        raise ValueError("bad data")
    [body] = server.bodies
    assert "gpu_utilization" not in body  # unknown: the server counts it in spend only
    assert (body["outcome"], body["workers"]) == ("failed", 2)


def test_a_keyboard_interrupt_is_a_cancelled_attempt() -> None:
    server = Server()
    with client_for(server) as cadence, pytest.raises(KeyboardInterrupt):
        with cadence.track_run(pipeline="ranker", run_id="r4b", workers=1, retraining_id="w48"):
            raise KeyboardInterrupt
    [body] = server.bodies
    assert (body["outcome"], body["retraining_id"]) == ("cancelled", "w48")


def test_a_succeeded_run_sends_neither_outcome_nor_retraining_id_so_older_servers_take_it() -> None:
    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r4c", workers=1) as run:
            pass
    [body] = server.bodies
    assert "outcome" not in body and "retraining_id" not in body
    assert run.outcome == "succeeded"


def test_a_failed_post_after_a_failed_job_does_not_hide_the_jobs_error(tmp_path: Path) -> None:
    server = Server(status=503)
    with (
        client_for(server, max_attempts=2) as cadence,
        pytest.raises(KeyError),
        cadence.track_run(pipeline="ranker", run_id="r3", workers=1, spool=tmp_path),
    ):
        raise KeyError("batch")
    assert len(server.bodies) == 2  # tried (and retried), then spooled, then the job's error
    [spooled] = Spool(tmp_path).pending()
    assert (spooled["run_id"], spooled["outcome"]) == ("r3", "failed")


def test_a_refused_run_never_fails_a_job_that_succeeded_unless_strict(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with client_for(Server(status=422)) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r5", workers=1, spool=tmp_path) as run:
            run.set(gpu_utilization=0.5)
    assert run.result is None and run.spooled is None  # a refusal is not retried later
    assert "run ranker/r5 refused, not recorded" in caplog.text
    with client_for(Server(status=422)) as cadence, pytest.raises(ValidationFailed):
        with cadence.track_run(pipeline="ranker", run_id="r5", workers=1, strict=True):
            pass


def test_an_unreachable_server_spools_the_run_and_the_next_post_sends_it(tmp_path: Path) -> None:
    down = Server(status=503)
    with client_for(down, max_attempts=3) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r7", workers=1, spool=tmp_path) as run:
            run.set(gpu_utilization=0.5)
    assert len(down.bodies) == 3 and run.result is None
    assert run.spooled is not None and run.spooled.parent == tmp_path
    [kept] = Spool(tmp_path).pending()
    assert kept["run_id"] == "r7" and kept["started_at"] == "2026-11-30T08:00:00+00:00"

    up = BatchServer()
    with client_for(up) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r8", workers=1, spool=tmp_path):
            pass
    # The start report of r8, then its finish.
    assert [(b["run_id"], b.get("outcome")) for b in up.singles] == [
        ("r8", "running"),
        ("r8", None),
    ]
    assert [r["run_id"] for r in up.batched] == ["r7"]  # drained after the success
    assert Spool(tmp_path).files() == []


def test_strict_raises_when_the_server_is_down_but_still_spools(tmp_path: Path) -> None:
    with client_for(Server(status=503), max_attempts=1) as cadence:
        with pytest.raises(ServiceUnavailable):
            with cadence.track_run(
                pipeline="ranker", run_id="r7s", workers=1, spool=tmp_path, strict=True
            ):
                pass
    assert [r["run_id"] for r in Spool(tmp_path).pending()] == ["r7s"]


def test_the_payload_is_json_and_carries_measured_stall_and_checkpoint_hours() -> None:
    with client_for(Server()) as cadence:
        run = cadence.track_run(pipeline="ranker", run_id="r10", workers=2)
        with run:
            run.watch.add_stall(1800.0)  # half an hour waiting for data
            run.watch.add_checkpoint(360.0)  # six minutes writing checkpoints
            assert list(run.timed([1, 2, 3])) == [1, 2, 3]
    body = json.loads(json.dumps(run.payload()))
    # 1800 s / 3600 = 0.5 h, plus the few microseconds the three next() calls took
    assert body["data_stall_hours"] == pytest.approx(0.5, abs=1e-4)
    assert body["checkpoint_hours"] == pytest.approx(0.1)  # 360 s / 3600
    assert body["started_at"] == "2026-11-30T08:00:00+00:00"


def test_numpy_and_tensor_scalars_are_sent_as_numbers() -> None:
    class Scalar:  # what numpy.float32(0.71) and torch.tensor(0.71) offer
        def item(self) -> float:
            return 0.71

    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r12", workers=1) as run:
            run.set(gpu_utilization=Scalar())
    assert server.bodies[0]["gpu_utilization"] == 0.71


def test_a_stall_the_job_reports_itself_wins_over_the_measured_one() -> None:
    with client_for(Server()) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r11", workers=1) as run:
            with run.waiting_for_data():
                pass
            run.set(data_stall_hours=2.0)
    assert run.payload()["data_stall_hours"] == 2.0
    assert "checkpoint_hours" not in run.payload()  # nothing measured: left to the server


def test_set_refuses_the_fields_the_tracker_owns() -> None:
    with client_for(Server()) as cadence:
        run = cadence.track_run(pipeline="ranker", run_id="r6", workers=1)
        with pytest.raises(ValueError, match="started_at"):
            run.set(started_at=START)


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
    assert "pip install cadence-gpu-client[nvml]" in sampler.status


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


class OldServer(Server):
    """A server from before running attempts: "running" is not an outcome it knows."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("outcome") == "running":
            self.starts.append(body)
            error = {"code": "validation_error", "message": "bad outcome", "fields": []}
            return httpx.Response(422, json={"error": error})
        return super().__call__(request)


def test_the_start_is_reported_on_entry_and_the_finish_completes_it() -> None:
    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(
            pipeline="ranker", run_id="r20", workers=8, variant="candidate",
            gpu_utilization=0.4, tags={"team": "ranking"},
        ) as run:  # fmt: skip
            assert len(server.starts) == 1 and server.bodies == []  # reported at once
    [start] = server.starts
    assert start["outcome"] == "running" and start["started_at"] == "2026-11-30T08:00:00+00:00"
    assert (start["variant"], start["workers"], start["tags"]) == (
        "candidate",
        8,
        {"team": "ranking"},
    )
    # No finish, billed hours or utilization at the start: the finish brings them.
    assert not {"finished_at", "gpu_hours", "gpu_utilization"} & set(start)
    [finish] = server.bodies
    assert finish["finished_at"] == "2026-11-30T22:00:00+00:00" and "outcome" not in finish
    assert finish["gpu_utilization"] == 0.4 and run.result is not None


def test_an_older_server_refusing_the_start_still_gets_the_finished_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = OldServer()
    with client_for(server) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r21", workers=1, strict=True) as run:
            pass
    assert len(server.starts) == 1  # tried once (a 422 is not retried)
    [finish] = server.bodies
    assert finish["run_id"] == "r21" and run.result is not None
    assert "refused, not recorded" not in caplog.text


def test_a_start_the_server_could_not_take_is_spooled_and_dropped_by_the_finish(
    tmp_path: Path,
) -> None:
    # Down at the start: the start is spooled. Up at the finish: the finish is posted and
    # the spooled start removed (sent after the finish it would be refused, a 409).
    answers = iter([503, 503, 201])

    def flaky(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        status = next(answers, 201)
        if status == 503:
            return httpx.Response(503, json={"error": {"code": "x", "message": "down"}})
        return httpx.Response(201, json={"id": 1, **body})

    cadence = CadenceClient(
        BASE, "cad_x", transport=httpx.MockTransport(flaky), now=lambda: START,
        max_attempts=2, backoff_max=0.01,
    )  # fmt: skip
    with cadence:
        with cadence.track_run(pipeline="ranker", run_id="r22", workers=1, spool=tmp_path) as run:
            assert run.start_spooled is not None
            [spooled] = Spool(tmp_path).pending()
            assert spooled["outcome"] == "running"
    assert run.start_spooled is None and run.result is not None
    assert Spool(tmp_path).files() == []


def test_report_start_false_posts_only_the_finish() -> None:
    server = Server()
    with client_for(server) as cadence:
        with cadence.track_run(pipeline="ranker", run_id="r23", workers=1, report_start=False):
            pass
    assert server.starts == [] and len(server.bodies) == 1
