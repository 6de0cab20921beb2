"""``cadence import slurm``: the mapping of real sacct output (tests/fixtures/slurm, recorded
from a one-machine Slurm 22.05: see its README), both formats, and the import into the
in-process app through cadence-client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from app.planning.imports import totals
from app.sources import slurm_command
from app.sources.posting import attempt_of, measurement_only_conflicts
from app.sources.slurm import (
    Attempt,
    Options,
    SacctError,
    gpus,
    map_all,
    parse,
    plausible_utilization,
)
from tests.fixtures.builders import make_token
from tests.fixtures.client import through

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"
PARSABLE = (FIXTURES / "sacct-parsable.txt").read_text()
JSON = (FIXTURES / "sacct.json").read_text()
URL = "http://testserver"


def by_run_id(text: str, **options: Any) -> dict[str, dict[str, Any]]:
    mapped = map_all(parse(text), Options(**options))
    return {m.payload["run_id"]: m.payload for m in mapped if m.payload}


def test_recorded_parsable_output_maps_each_attempt() -> None:
    mapped = map_all(parse(PARSABLE), Options())
    unread = {m.source: m.reason for m in mapped if m.payload is None}
    assert unread == {
        "job 5 (etl-cpu)": "no GPUs allocated (no gres/gpu in AllocTRES or GresUsed)",
    }
    runs = {m.payload["run_id"]: m for m in mapped if m.payload}
    outcomes = {k: (m.payload["outcome"], m.payload["workers"]) for k, m in runs.items()}
    assert outcomes == {
        "slurm-cadence-1-20261201T160407Z": ("succeeded", 2),
        "slurm-cadence-2-20261201T160413Z": ("failed", 1),
        "slurm-cadence-3-20261201T160413Z": ("cancelled", 1),  # "CANCELLED by 0"
        "slurm-cadence-4-20261201T160417Z": ("preempted", 2),  # REQUEUED
        "slurm-cadence-4-20261201T160626Z": ("succeeded", 2),  # the requeued start
        "slurm-cadence-6-20261201T160420Z": ("succeeded", 1),
        "slurm-cadence-7-20261201T160523Z": ("failed", 1),  # TIMEOUT
        "slurm-cadence-8-20261201T160643Z": ("running", 1),  # RUNNING: a running attempt
    }
    first, second = (
        runs["slurm-cadence-4-20261201T160417Z"].payload,
        runs["slurm-cadence-4-20261201T160626Z"].payload,
    )
    # Both starts of job 4 are attempts of one retraining.
    assert first["retraining_id"] == second["retraining_id"] == "slurm-cadence-4"
    # Requeued: Eligible 16:06:21, Start 16:06:26 -> 5 s = 0.001389 h of queue wait.
    assert second["scheduling_wait_hours"] == pytest.approx(5 / 3600, abs=1e-6)
    assert second["started_at"] == "2026-12-01T16:06:26+00:00"
    assert second["finished_at"] == "2026-12-01T16:06:32+00:00"
    # Job 6 waited on a dependency from Submit 16:04:08 to Eligible 16:04:13, then queued
    # until Start 16:04:20: the wait is 7 s, not 12.
    job6 = runs["slurm-cadence-6-20261201T160420Z"]
    assert job6.payload["scheduling_wait_hours"] == pytest.approx(7 / 3600, abs=1e-6)
    # Job 1: 2 GPUs for 16:04:07..16:04:11 = 4 s -> 8 GPU-seconds = 0.002222 GPU-hours.
    one = totals([attempt_of(runs["slurm-cadence-1-20261201T160407Z"].payload)])
    assert one["ranker-train"].gpu_hours == pytest.approx(8 / 3600)
    assert job6.payload["gpu_type"] == "a100"
    assert job6.payload["tags"]["slurm_account"] == "vision"
    # No GPU accounting plugin ran: utilization is left unknown, not 0.
    assert all("gpu_utilization" not in m.payload for m in runs.values())


def test_recorded_json_gives_the_same_runs_as_the_parsable_output() -> None:
    # The JSON names each job's nodes ("nodes": "vm"); this -P file was saved before
    # NodeList was among the columns asked for, so only the JSON's runs carry slurm_nodes
    # (the node-level DCGM matcher's tag). Everything else is the same.
    json_runs = by_run_id(JSON)
    assert {r["tags"].pop("slurm_nodes") for r in json_runs.values()} == {"vm"}
    assert json_runs == by_run_id(PARSABLE)


def test_nodelist_becomes_the_expanded_slurm_nodes_tag() -> None:
    header = "JobIDRaw|JobID|JobName|Account|Cluster|State|Submit|Start|End|AllocTRES|NodeList"
    row = (
        "77|77|ranker|ml|hpc|COMPLETED|2026-12-01T08:00:00|2026-12-01T08:00:00|"
        "2026-12-01T10:00:00|gres/gpu=16,node=2|gpu-[07-08]"
    )
    (payload,) = by_run_id(f"{header}\n{row}\n").values()
    assert payload["tags"]["slurm_nodes"] == "gpu-07,gpu-08"


def test_pipeline_from_account_or_one_pipeline() -> None:
    pipelines = {p["pipeline"] for p in by_run_id(PARSABLE, pipeline_from="account").values()}
    assert pipelines == {"ranking", "vision"}
    one = {p["pipeline"] for p in by_run_id(PARSABLE, pipeline="hpc-ranker").values()}
    assert one == {"hpc-ranker"}


def test_times_of_a_parsable_file_in_another_zone() -> None:
    from zoneinfo import ZoneInfo

    attempts = parse(PARSABLE, ZoneInfo("Europe/Paris"))  # UTC+1 in December
    assert attempts[0].start is not None
    assert attempts[0].start.isoformat() == "2026-12-01T15:04:07+00:00"


# gres/gpuutil: no record of the recording has it (no NVML here); these values are
# written by hand in the format of TRESUsageInAve.
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([87.0], 0.87),
        ([80.0, 60.0], 0.70),  # two steps: (80 + 60) / 2 = 70 % -> 0.70
        ([0.0], None),  # no accounting plugin: unknown, never 0
        ([1.8446744073709552e19], None),  # the "infinite" sentinel
        ([0.0, 90.0], 0.90),  # the implausible step is left out
        ([], None),
    ],
)
def test_gpuutil_is_used_only_when_plausible(values: list[float], expected: float | None) -> None:
    assert plausible_utilization(values) == (None if expected is None else pytest.approx(expected))


def test_gpuutil_from_step_lines_and_an_implausible_one_is_noted() -> None:
    added = {"1.0": ",gres/gpuutil=87", "2.0": ",gres/gpuutil=0"}  # written by hand
    lines = PARSABLE.splitlines()
    text = "\n".join(
        [lines[0]]
        + [
            line + added.get(line.split("|")[0], "")
            for line in lines[1:]
            if line.split("|")[0].split(".")[0] in {"1", "2"}
        ]
    )
    mapped = {m.source: m for m in map_all(parse(text), Options())}
    one = mapped["job 1 (ranker-train)"]
    assert one.payload is not None
    assert one.payload["gpu_utilization"] == pytest.approx(0.87)
    assert one.payload["utilization_source"] == "nvml_gpu_util"
    two = mapped["job 2 (ranker-train)"]
    assert two.payload is not None and "gpu_utilization" not in two.payload
    assert two.notes == ("gres/gpuutil 0 is not a plausible percentage: utilization unknown",)


def test_gres_used_is_the_fallback_for_gpus() -> None:
    attempt = Attempt(job_id="9", tres={}, gres="gpu:v100:4(IDX:0-3)")
    assert gpus(attempt) == (4, "v100")
    typed_only = Attempt(job_id="9", tres={"gres/gpu:h100": 8.0})
    assert gpus(typed_only) == (8, "h100")


def test_a_file_without_the_needed_columns_is_refused_naming_them() -> None:
    with pytest.raises(
        SacctError, match=r"lacks column\(s\) JobIDRaw, Cluster, Submit, Start, End"
    ):
        parse("JobID|State\n1|COMPLETED\n")
    # Without Cluster the run ids would differ from the JSON's: refused with the command.
    with pytest.raises(SacctError, match=r"lacks column\(s\) Cluster .*sacct -a -D -P --format="):
        parse("JobIDRaw|JobID|State|Submit|Start|End\n1|1|COMPLETED|||\n")
    with pytest.raises(SacctError, match='no "jobs" list'):
        parse('{"meta": {}}')


def test_measurement_only_conflicts_are_recognised() -> None:
    fields = [{"field": "runs.3.gpu_utilization"}, {"field": "runs.3.utilization_source"}]
    assert measurement_only_conflicts(fields) == {3}
    assert measurement_only_conflicts([*fields, {"field": "runs.4.workers"}]) == set()


# The command ---------------------------------------------------------------------------


def args(path: Path, *argv: str) -> Any:
    return cli.parser().parse_args(["import", "slurm", "--file", str(path), "--url", URL, *argv])


def test_dry_run_prints_the_table_and_lists_what_it_could_not_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = slurm_command.run_import(args(FIXTURES / "sacct.json", "--dry-run"))
    out, err = capsys.readouterr()
    assert code == 0
    # ranker-train: jobs 1 (ok), 2 (failed), 7 (timeout); 1 x 4 s x 2 + 3 s + 63 s = 74
    # GPU-seconds = 0.02 GPU-hours.
    assert "ranker-train                               3        3      1      2" in out
    assert "ranker-nightly                             1        2      1      0       1" in out
    assert "not imported: job 5 (etl-cpu): no GPUs allocated" in err
    assert "job 8" not in err  # running: imported as a running attempt
    assert "would import 8, could not read 1; nothing posted" in err


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert slurm_command.run_import(args(tmp_path / "missing.json", "--dry-run")) == 2
    assert "missing.json" in capsys.readouterr().err


def succeeded_with_utilization(tmp_path: Path) -> Path:
    """Jobs 1 and 6 (succeeded) with gres/gpuutil written into their srun steps by hand."""
    keep = []
    for line in PARSABLE.splitlines():
        job = line.split("|")[0].split(".")[0]
        if job in {"JobIDRaw", "1", "6"}:
            step = line.startswith(("1.0|", "6.0|"))
            keep.append(line + (",gres/gpuutil=55" if step else ""))
    path = tmp_path / "jobs.txt"
    path.write_text("\n".join(keep) + "\n")
    return path


def test_import_then_reimport_stores_nothing_twice(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    path = succeeded_with_utilization(tmp_path)
    statuses: list[int] = []
    first = args(path, "--token", token, "--pipeline", "hpc-ranker")
    assert slurm_command.run_import(first, transport=through(client, statuses)) == 0
    assert "read 2, imported 2 (2 created / 0 already there), could not read 0" in (
        capsys.readouterr().out
    )
    again = slurm_command.run_import(first, transport=through(client, statuses))
    assert again == 0
    assert "(0 created / 2 already there)" in capsys.readouterr().out
    runs = client.get("/api/v1/runs", params={"pipeline": "hpc-ranker"}).json()["runs"]
    assert sorted(r["run_id"] for r in runs) == [
        "slurm-cadence-1-20261201T160407Z",
        "slurm-cadence-6-20261201T160420Z",
    ]
    job1 = next(r for r in runs if r["run_id"].startswith("slurm-cadence-1-"))
    assert job1["workers"] == 2 and job1["gpu_utilization"] == pytest.approx(0.55)
    # 2 GPUs x 4 s = 0.002222 GPU-hours billed.
    assert job1["gpu_hours"] == pytest.approx(8 / 3600)
    assert statuses == [201, 200]  # one batch each time


def test_whole_recording_imports_with_outcomes(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    code = slurm_command.run_import(
        args(FIXTURES / "sacct.json", "--token", token), transport=through(client, [])
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "read 9, imported 8 (8 created / 0 already there), could not read 1" in out
    runs = client.get("/api/v1/runs", params={"pipeline": "ranker-nightly"}).json()["runs"]
    assert sorted(r["outcome"] for r in runs) == ["preempted", "succeeded"]
    assert {r["retraining_id"] for r in runs} == {"slurm-cadence-4"}
    assert [r["gpu_utilization"] for r in runs] == [None, None]  # unknown, not 0
    # Enriched since (cadence enrich): a re-import differs in utilization only. The server
    # takes such a retry as the stored run (issue 36 item 4: the measurement fields its
    # audit says were changed after ingest are no conflict), so it is already there.
    url = "/api/v1/pipelines/ranker-nightly/runs/slurm-cadence-4-20261201T160626Z/measurements"
    headers = {"Authorization": f"Bearer {token}"}
    body = {"gpu_utilization": 0.7, "utilization_source": "dcgm_gr_engine_active"}
    assert client.patch(url, json=body, headers=headers).status_code == 200
    again = slurm_command.run_import(
        args(FIXTURES / "sacct.json", "--token", token), transport=through(client, [])
    )
    assert again == 0
    assert "(0 created / 8 already there)" in capsys.readouterr().out
    stored = client.get("/api/v1/runs", params={"pipeline": "ranker-nightly"}).json()["runs"]
    assert sorted(str(r["gpu_utilization"]) for r in stored) == ["0.7", "None"]  # kept


def test_no_token_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    monkeypatch.delenv("CADENCE_TOKEN", raising=False)
    assert slurm_command.run_import(args(FIXTURES / "sacct.json")) == 2
    assert "no token" in capsys.readouterr().err


def fake_sacct(tmp_path: Path, body: str) -> None:
    script = tmp_path / "sacct"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def test_runs_sacct_in_utc_when_no_file_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stand-in sacct that records how it was called and prints the recording.
    fake_sacct(tmp_path, f'echo "TZ=$TZ $*" > {tmp_path}/called; cat {FIXTURES}/sacct-parsable.txt')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    argv = ["import", "slurm", "--since", "2026-11-01", "--dry-run"]
    assert slurm_command.run_import(cli.parser().parse_args(argv)) == 0
    called = (tmp_path / "called").read_text()
    assert called.startswith("TZ=UTC --allusers --duplicates --parsable2")
    assert "--starttime=2026-11-01T00:00:00" in called
    assert "would import 8" in capsys.readouterr().err


def test_a_failing_sacct_exits_2_with_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_sacct(tmp_path, 'echo "sacct: error: Problem talking to the database" >&2; exit 1')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    argv = ["import", "slurm", "--dry-run"]
    assert slurm_command.run_import(cli.parser().parse_args(argv)) == 2
    assert "sacct failed (exit 1): sacct: error: Problem talking to the database" in (
        capsys.readouterr().err
    )


def test_a_long_import_posts_in_batches_with_progress(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1,001 generated records in the recorded format: three batches of at most 500.
    header, job = PARSABLE.splitlines()[0], PARSABLE.splitlines()[1]
    fields = job.split("|")
    lines = [header]
    for n in range(1, 1002):
        fields[0] = fields[1] = str(1000 + n)
        lines.append("|".join(fields))
    path = tmp_path / "many.txt"
    path.write_text("\n".join(lines) + "\n")
    token = make_token(db, "ingest")
    statuses: list[int] = []
    argv = args(path, "--token", token, "--pipeline", "many")
    assert slurm_command.run_import(argv, transport=through(client, statuses)) == 0
    out, err = capsys.readouterr()
    assert "posted 1,001/1,001" in err
    assert "imported 1001 (1001 created / 0 already there)" in out
    assert statuses == [201, 201, 201]
    assert slurm_command.run_import(argv, transport=through(client, statuses)) == 0
    assert "(0 created / 1001 already there)" in capsys.readouterr().out


def test_control_characters_in_names_are_removed_from_tags() -> None:
    header, job = PARSABLE.splitlines()[0], PARSABLE.splitlines()[1]
    text = header + "\n" + job.replace("ranker-train", "ranker\x1b[31m-train\x07", 1)
    [mapped] = map_all(parse(text), Options())
    assert mapped.payload is not None
    assert mapped.payload["tags"]["slurm_job_name"] == "ranker[31m-train"
    assert mapped.payload["pipeline"] == "ranker-31m-train"  # a slug of what is left


def test_a_running_job_is_a_running_attempt_completed_by_the_next_import(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Job 8 runs (End Unknown) in the recording; an hour later sacct says COMPLETED,
    # 1 GPU from 16:06:43 to 17:06:43: 1 GPU-hour.
    token = make_token(db, "ingest")
    lines = [ln for ln in PARSABLE.splitlines() if ln.split("|")[0] in {"JobIDRaw", "8"}]
    path = tmp_path / "jobs.txt"
    path.write_text("\n".join(lines) + "\n")
    first = args(path, "--token", token, "--pipeline", "hpc-vision")
    assert slurm_command.run_import(first, transport=through(client, [])) == 0
    assert "imported 1 (1 created / 0 already there)" in capsys.readouterr().out
    [run] = client.get("/api/v1/runs", params={"pipeline": "hpc-vision"}).json()["runs"]
    assert run["outcome"] == "running" and run["finished_at"] is None
    done = [ln.replace("|RUNNING|", "|COMPLETED|").replace("|Unknown|", "|2026-12-01T17:06:43|")
            for ln in lines]  # fmt: skip
    path.write_text("\n".join(done) + "\n")
    assert slurm_command.run_import(first, transport=through(client, [])) == 0
    assert "1 running before, finished now" in capsys.readouterr().out
    [run] = client.get("/api/v1/runs", params={"pipeline": "hpc-vision"}).json()["runs"]
    assert run["outcome"] == "succeeded" and run["gpu_hours"] == pytest.approx(1.0)


STEP_FAILED = (
    "JobIDRaw|JobID|JobName|Account|Cluster|State|Submit|Start|End|AllocTRES|DerivedExitCode|"
    "ExitCode\n"
    "77|77|ranker|ml|hpc|COMPLETED|2026-11-02T08:00:00|2026-11-02T08:00:00|2026-11-02T10:00:00|"
    "gres/gpu=8|3:0|0:0\n"
    "77.batch|77.batch|batch|ml|hpc|COMPLETED|||||0:0|0:0\n"
    "77.0|77.0|python|ml|hpc|FAILED|||||0:0|3:0\n"
)


def test_a_failed_step_makes_a_completed_job_failed_in_both_formats() -> None:
    [text] = map_all(parse(STEP_FAILED), Options(pipeline="p"))
    assert text.payload["outcome"] == "failed"  # State COMPLETED, but srun step 77.0 exited 3
    assert text.payload["tags"]["slurm_failed_steps"] == "77.0"
    assert text.payload["tags"]["slurm_derived_exit_code"] == "3:0"
    code = {"status": "ERROR", "return_code": {"set": True, "infinite": False, "number": 3}}
    ok = {"status": ["SUCCESS"], "return_code": {"set": True, "infinite": False, "number": 0}}
    job = {
        "job_id": 77, "name": "ranker", "account": "ml", "cluster": "hpc",
        "state": {"current": ["COMPLETED"]}, "derived_exit_code": code, "exit_code": ok,
        "time": {"submission": 1793606400, "start": 1793606400, "end": 1793613600},
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 8}]},
        "steps": [{"step": {"id": "77.batch"}, "exit_code": ok},
                  {"step": {"id": "77.0"}, "exit_code": code}],
    }  # fmt: skip
    [from_json] = map_all(parse(json.dumps({"jobs": [job]})), Options(pipeline="p"))
    assert from_json.payload["run_id"] == text.payload["run_id"] == "slurm-hpc-77-20261102T080000Z"
    assert from_json.payload["outcome"] == "failed"
    assert from_json.payload["tags"]["slurm_failed_steps"] == "77.0"


def test_a_requeued_jobs_old_signal_does_not_fail_its_clean_last_start() -> None:
    # DerivedExitCode keeps 0:15 from the first start's killed steps; this start's own
    # steps exited 0, so the attempt succeeded.
    clean = STEP_FAILED.replace("|3:0|0:0\n", "|0:15|0:0\n", 1).replace(
        "FAILED|||||0:0|3:0", "COMPLETED|||||0:0|0:0"
    )
    [m] = map_all(parse(clean), Options(pipeline="p"))
    assert m.payload["outcome"] == "succeeded"
    assert "slurm_failed_steps" not in m.payload["tags"]
