"""Issue 36, items 1 and 7: the red team's importer reproductions, replayed. A file is
imported whole or not at all; hostile files end in a clear message, never a traceback.
(Items 5 and 6, memory and values that are not measurements: test_red_team_values.py.)
"""

from __future__ import annotations

import json
from argparse import Namespace
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from app.sources import slurm_command
from app.sources.kubernetes import Options as KubeOptions
from app.sources.kubernetes import map_all as map_jobs
from app.sources.posting import check_all, post_mapped
from app.sources.sacct import SacctError
from app.sources.slurm import Options as SlurmOptions
from app.sources.slurm import map_attempt, parse
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import report, through

URL = "http://testserver"
HEADER = (
    "JobIDRaw|JobID|JobName|Account|Cluster|Partition|User|State|Submit|Eligible|Start|End|"
    "AllocTRES"
)
GPUS = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}


def sacct_line(job: int, start: str = "2026-11-02T08:00:00", gres: str = "gres/gpu=2") -> str:
    """One finished job of ``sacct -P``: an hour from ``start`` on two GPUs."""
    end = start[:11] + "09" + start[13:]
    return (
        f"{job}|{job}|train|ranking|hpc|gpu|ann|COMPLETED|{start}|{start}|{start}|{end}|"
        f"cpu=8,{gres},node=1"
    )


def sacct_file(path: Path, count: int, bad: dict[int, str] | None = None) -> Path:
    """``count`` jobs; record n (1-based) starts at ``bad[n]`` instead."""
    lines = [HEADER]
    for n in range(1, count + 1):
        lines.append(sacct_line(n, (bad or {}).get(n, f"2026-11-{1 + n % 28:02d}T08:00:00")))
    path.write_text("\n".join(lines) + "\n")
    return path


def slurm_args(path: Path, *argv: str) -> Any:
    return cli.parser().parse_args(
        ["import", "slurm", "--file", str(path), "--url", URL, "--pipeline", "hpc", *argv]
    )


def stored(client: TestClient, pipeline: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"pipeline": pipeline, "limit": 1000}
        if cursor:
            params["cursor"] = cursor
        answer = client.get("/api/v1/runs", params=params)
        if answer.status_code == 404:  # no such pipeline: nothing stored
            return []
        page = answer.json()
        runs += page["runs"]
        cursor = page["next_cursor"]
        if not cursor:
            return runs


# -- 1. all or nothing -------------------------------------------------------------------


def test_a_slurm_file_with_record_1101_in_2030_stores_nothing(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: batches of 500 stored 1,000 of the 1,200 jobs, then exit 1.
    path = sacct_file(tmp_path / "jobs.txt", 1200, {1101: "2030-01-05T08:00:00"})
    token = make_token(db, "ingest")
    statuses: list[int] = []
    code = slurm_command.run_import(
        slurm_args(path, "--token", token), transport=through(client, statuses)
    )
    err = capsys.readouterr().err
    assert code == 1
    assert statuses == []  # not one request
    assert "job 1101 (train): started_at: 2030-01-05T08:00:00+00:00 is more than 24 h" in err
    assert "Nothing was stored" in err and "1200 records" in err
    assert stored(client, "hpc") == []


def test_a_slurm_json_file_with_one_bad_job_stores_nothing(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = [
        {
            "job_id": n,
            "name": "train",
            "cluster": "hpc",
            "state": {"current": ["COMPLETED"]},
            "time": {"submission": 1793606400, "start": 1793606400 + n, "end": 1793610000 + n},
            "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]},
        }
        for n in range(1, 601)
    ]
    jobs[550]["tres"]["allocated"][0]["count"] = float("inf")  # gres/gpu Infinity
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"meta": {"plugin": {}}, "jobs": jobs}))
    token = make_token(db, "ingest")
    code = slurm_command.run_import(
        slurm_args(path, "--token", token), transport=through(client, [])
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "job 551 (train): gres/gpu=inf in AllocTRES is not a GPU count" in err
    assert stored(client, "hpc") == []


def test_a_later_batch_the_server_refuses_says_exactly_what_is_stored(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What no check on this machine can see: job 1101's run id is stored already with
    # other values (a conflict). The first two batches (1,000 runs) are stored, and the
    # importer says so, naming the first job not stored.
    path = sacct_file(tmp_path / "jobs.txt", 1200)
    token = make_token(db, "ingest")
    [record] = [a for a in parse(path.read_text()) if a.job_id == "1101"]
    payload = map_attempt(record, SlurmOptions(pipeline="hpc")).payload or {}
    taken = {**payload, "workers": 7}
    assert (
        client.post(
            "/api/v1/runs", json=taken, headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 201
    )
    code = slurm_command.run_import(
        slurm_args(path, "--token", token), transport=through(client, [])
    )
    err = capsys.readouterr().err
    assert code == 3
    assert "stored are the first 1000 of the 1200 runs to import (1000 created" in err
    assert "not stored are the 200 from job 1001 (train) on" in err
    assert len(stored(client, "hpc")) == 1001  # the 1,000 and the one posted before


def csv_of(path: Path, runs: list[dict[str, Any]]) -> Path:
    columns = ["pipeline", "run_id", "started_at", "finished_at", "workers", "gpu_utilization"]
    rows = [",".join(columns)] + [",".join(str(r[c]) for c in columns) for r in runs]
    path.write_text("\n".join(rows) + "\n")
    return path


def report_runs(count: int) -> list[dict[str, Any]]:
    return [
        make_run(pipeline="csv-import", run_id=f"r{n}", gpu_utilization=0.5)
        for n in range(1, count + 1)
    ]


def test_cadence_report_of_a_csv_with_row_1101_in_2030_stores_nothing(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "the first 1000 runs were stored before this".
    runs = report_runs(1200)
    runs[1100]["started_at"] = "2030-01-05T08:00:00+00:00"
    runs[1100]["finished_at"] = "2030-01-05T09:00:00+00:00"
    path = csv_of(tmp_path / "runs.csv", runs)
    token = make_token(db, "ingest")
    assert report(client, token, "--file", str(path)) == 1
    err = capsys.readouterr().err
    assert "runs.csv line 1102 (run r1101): started_at: 2030-01-05T08:00:00+00:00 is more" in err
    assert "nothing was stored" in err
    assert stored(client, "csv-import") == []


def test_cadence_report_says_exactly_what_is_stored_when_a_later_batch_is_refused(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = report_runs(1200)
    token = make_token(db, "ingest")
    other = {**runs[1100], "workers": 7}  # r1101, stored first with other values
    assert (
        client.post(
            "/api/v1/runs", json=other, headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 201
    )
    assert report(client, token, "--file", str(csv_of(tmp_path / "runs.csv", runs))) == 3
    err = capsys.readouterr().err
    # Batches of 500: lines 2-501 and 502-1001 stored, the third (1002-1201) refused.
    assert "stored are the first 1000 of the 1200 runs, up to line 1001" in err
    assert "not stored are the 200 from line 1002 on" in err
    assert len(stored(client, "csv-import")) == 1001


def kube_job(name: str, start: str, end: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "spec": {"template": {"spec": GPUS}},
        "status": {
            "startTime": start,
            "completionTime": end,
            "conditions": [{"type": "Complete", "status": "True"}],
        },
        **extra,
    }  # fmt: skip


def kube_args(token: str) -> Namespace:
    return Namespace(dry_run=False, token=token, url=URL)


def test_the_kubernetes_importer_refuses_a_bad_job_whole(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = [kube_job(f"j{n}", "2026-11-02T08:00:00Z", "2026-11-02T09:00:00Z") for n in range(700)]
    jobs[650] = kube_job("late", "2030-01-05T08:00:00Z", "2030-01-05T09:00:00Z")
    mapped = map_jobs(jobs, [], [], KubeOptions(pipeline="k8s"))
    token = make_token(db, "ingest")
    assert post_mapped(kube_args(token), mapped, transport=through(client, [])) == 1
    err = capsys.readouterr().err
    assert "Job ml/late: started_at: 2030-01-05T08:00:00+00:00 is more than 24 h" in err
    assert stored(client, "k8s") == []


def test_a_kubernetes_status_that_is_a_list_is_named_not_a_traceback(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    good = kube_job("good", "2026-11-02T08:00:00Z", "2026-11-02T09:00:00Z")
    broken = {**kube_job("broken", "2026-11-02T08:00:00Z", "2026-11-02T09:00:00Z"), "status": []}
    odd_pod = {"metadata": [], "spec": {}}
    mapped = map_jobs([good, broken], [odd_pod], [], KubeOptions(pipeline="k8s"))
    token = make_token(db, "ingest")
    assert post_mapped(kube_args(token), mapped, transport=through(client, [])) == 1
    assert "Job ml/broken: malformed: its status is list, not an object" in capsys.readouterr().err
    assert stored(client, "k8s") == []


# -- 7. tracebacks, offsets, encodings --------------------------------------------------


@pytest.mark.parametrize("count", ["inf", "nan", "-2", "2.5"])
def test_gres_gpu_that_is_no_count_refuses_the_file(
    tmp_path: Path, count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.txt"
    path.write_text(
        "\n".join([HEADER, sacct_line(1), sacct_line(2, gres=f"gres/gpu={count}")]) + "\n"
    )
    assert slurm_command.run_import(slurm_args(path, "--dry-run")) == 1
    err = capsys.readouterr().err
    assert f"job 2 (train): gres/gpu={float(count):g} in AllocTRES is not a GPU count" in err
    assert "Traceback" not in err


def test_a_100k_deep_sacct_json_is_refused_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"jobs": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    assert slurm_command.run_import(slurm_args(path, "--dry-run")) == 2
    assert "jobs item 1 is nested too deeply to be a job record" in capsys.readouterr().err


def test_a_slurm_time_with_an_explicit_offset_keeps_it() -> None:
    # 08:00 at +02:00 is 06:00 UTC; --timezone applies only to times without an offset.
    text = "\n".join([HEADER, sacct_line(1, "2026-11-02T08:00:00+02:00")])
    from zoneinfo import ZoneInfo

    [attempt] = parse(text, ZoneInfo("America/New_York"))
    assert attempt.start is not None and attempt.start.isoformat() == "2026-11-02T06:00:00+00:00"
    [plain] = parse("\n".join([HEADER, sacct_line(1)]), ZoneInfo("America/New_York"))
    assert plain.start is not None and plain.start.isoformat() == "2026-11-02T13:00:00+00:00"


def latin1_file(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.txt"
    path.write_bytes(
        ("\n".join([HEADER, sacct_line(1).replace("|train|", "|entraîné|")]) + "\n").encode(
            "latin-1"
        )
    )
    return path


def test_a_latin1_file_is_refused_or_read_as_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = latin1_file(tmp_path)
    assert slurm_command.run_import(slurm_args(path, "--dry-run")) == 2
    err = capsys.readouterr().err
    assert "byte 0xee is not utf-8 text" in err and "--encoding latin-1" in err
    [attempt] = parse(path.read_text(encoding="latin-1"))
    assert attempt.name == "entraîné"  # read as declared, no U+FFFD
    code = slurm_command.run_import(slurm_args(path, "--dry-run", "--encoding", "latin-1"))
    assert code == 0


def test_a_utf16_file_is_read_by_its_bom_or_refused_saying_utf16(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "\n".join([HEADER, sacct_line(1)]) + "\n"
    with_bom = tmp_path / "bom.txt"
    with_bom.write_text(text, encoding="utf-16")  # Python writes the BOM
    assert slurm_command.run_import(slurm_args(with_bom, "--dry-run")) == 0
    assert "would import 1" in capsys.readouterr().err
    without = tmp_path / "nobom.txt"
    without.write_bytes(text.encode("utf-16-le"))
    assert slurm_command.run_import(slurm_args(without, "--dry-run")) == 2
    assert "looks like UTF-16 without a byte-order mark" in capsys.readouterr().err


def test_cadence_report_reads_a_utf16_csv_by_its_bom_and_refuses_latin1(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = report_runs(2)
    path = csv_of(tmp_path / "runs.csv", runs)
    path.write_text(path.read_text(), encoding="utf-16")
    token = make_token(db, "ingest")
    assert report(client, token, "--file", str(path)) == 0
    assert len(stored(client, "csv-import")) == 2
    latin = tmp_path / "latin.csv"
    latin.write_bytes(path.read_text(encoding="utf-16").replace("r1", "r\xe91").encode("latin-1"))
    assert report(client, token, "--file", str(latin)) == 2
    assert "latin.csv is not UTF-8 text" in capsys.readouterr().err


def test_a_file_changed_between_the_check_and_the_posts_stores_nothing(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sacct_file(tmp_path / "jobs.txt", 3)
    records = slurm_command.Records(path, None, UTC, SlurmOptions(pipeline="hpc"))
    assert check_all(records).ready == 3
    sacct_file(path, 4)  # rewritten after the check
    token = make_token(db, "ingest")
    with pytest.raises(SacctError, match="changed while it was being imported"):
        next(iter(records))
    code = post_mapped(kube_args(token), records, transport=through(client, []))
    assert code == 2
    assert "changed while it was being imported; nothing was stored" in capsys.readouterr().err
    assert stored(client, "hpc") == []
