"""`cadence report` and `cadence export`: file parsing, flags, exit codes against the
in-process app, and an export -> report round trip into a second, fresh database."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from cadence_client.commands import export as export_command
from cadence_client.commands import records
from cadence_client.commands import report as commands
from cadence_client.commands.check import run_check
from cadence_client.commands.plan import run_plan
from cadence_client.commands.records import RecordError, read_records
from fastapi.testclient import TestClient

from app.db.engine import Database, make_engine
from app.db.revision import alembic_config
from app.main import create_app
from app.runs.schemas import RunIn
from app.settings import Settings
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import URL, args, export, report


def no_server() -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.method} {request.url}")

    return httpx.MockTransport(handle)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A CSV of runs as a person would write it: JSON cells, empty cells for missing."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                [
                    json.dumps(r[c]) if isinstance(r.get(c), list | dict) else r.get(c, "")
                    for c in columns
                ]
            )
    return path


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CADENCE_TOKEN", raising=False)
    monkeypatch.delenv("CADENCE_URL", raising=False)


# Parsing -----------------------------------------------------------------------------


def test_every_run_field_has_a_csv_type() -> None:
    typed = records.INT_FIELDS | records.FLOAT_FIELDS | records.JSON_FIELDS | records.TEXT_FIELDS
    assert typed == set(RunIn.model_fields)
    read_only = {"id", "created_at", "wall_clock_hours", "effective_price_per_gpu_hour"}
    assert read_only | {"cost_usd", "idle_gpu_hours"} == records.READ_ONLY_FIELDS


def test_csv_types_empty_cells_json_cells_and_read_only_columns(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(
        "id,pipeline,run_id,workers,gpu_utilization,mfu,price_per_gpu_hour,gpu_type,"
        "interruptions,tags,cost_usd,wall_clock_hours,created_at\n"
        '7,ranker,r1,8,0.38,,2.5,,"[{""lost_progress_hours"": 0.5}]","{""a"": ""x,y""}",'
        "9.9,14.0,2026-01-01T00:00:00Z\n"
        "\n"
        '8,ranker,"r\n2",4,1,0.4,,H100,,,,,\n',
        encoding="utf-8",
    )
    first, second = read_records(path)
    assert first.where == "line 2" and second.where == "line 4"
    assert first.run == {
        "pipeline": "ranker",
        "run_id": "r1",
        "workers": 8,
        "gpu_utilization": 0.38,
        "price_per_gpu_hour": 2.5,
        "interruptions": [{"lost_progress_hours": 0.5}],
        "tags": {"a": "x,y"},
    }
    assert type(first.run["workers"]) is int and type(second.run["gpu_utilization"]) is float
    assert second.run == {
        "pipeline": "ranker",
        "run_id": "r\n2",
        "workers": 4,
        "gpu_utilization": 1.0,
        "mfu": 0.4,
        "gpu_type": "H100",
    }


def test_json_shapes_and_json_lines(tmp_path: Path) -> None:
    run = make_run()
    for body in (run, [run, run], {"runs": [run]}):
        path = tmp_path / "runs.json"
        path.write_text(json.dumps(body))
        got = read_records(path)
        assert [r.run for r in got] == ([run] if isinstance(body, dict) else body)
        assert got[-1].where == f"item {len(got)}"
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({**run, "id": 3, "cost_usd": 1.0}) + "\n\n" + json.dumps(run) + "\n")
    first, second = read_records(path)
    assert (first.run, first.where, second.where) == (run, "line 1", "line 3")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("pipeline,run_id\nranker,a\nranker,b,extra\n", "line 3: 3 cells"),
        ("pipeline,workers\nranker,8\nranker,eight\n", "line 3: workers: 'eight' is not a whole"),
        ("pipeline,gpu_utilization\nranker,nan\n", "line 2: gpu_utilization: 'nan' is not a fin"),
        ("pipeline,tags\nranker,{oops\n", "line 2: tags: invalid JSON"),
        ("pipeline,gpu_utilisation\nranker,0.3\n", "line 1: unknown column(s) 'gpu_utilisation'"),
        ('pipeline,run_id\nranker,"a\nranker,b\n', "bad CSV"),
        ("", "line 1: empty file"),
    ],
)
def test_bad_csv_is_a_usage_error_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(RecordError, match="line"):
        read_records(path)
    namespace = args("report", "--url", URL, "--token", "t", "--file", str(path))
    assert commands.run_report(namespace, transport=no_server()) == 2
    assert expected in capsys.readouterr().err


def test_unreadable_file_missing_token_and_mixed_sources_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    assert commands.run_report(args("report", "--token", "t", "--file", missing)) == 2
    assert "cannot read" in capsys.readouterr().err
    assert commands.run_report(args("report", "--file", missing)) == 2
    assert "CADENCE_TOKEN" in capsys.readouterr().err
    both = args("report", "--token", "t", "--file", missing, "--workers", "3")
    assert commands.run_report(both) == 2
    assert "not both" in capsys.readouterr().err


def test_flags_make_a_run_in_payload() -> None:
    namespace = args(
        "report",
        *("--pipeline", "ranker", "--run-id", "r1", "--variant", "candidate"),
        *("--started-at", "2026-11-02T08:00:00+00:00", "--finished-at", "2026-11-02T22:00:00Z"),
        *("--workers", "8", "--utilization", "0.38", "--gpu-type", "A100", "--gpu-hours", "100"),
        *("--price", "2.2", "--quality-metric", "ndcg", "--quality", "0.41"),
        *("--data-stall-hours", "5", "--checkpoint-hours", "1", "--scheduling-wait-hours", "0"),
        *("--mfu", "0.3", "--tag", "git=4f1c", "--tag", "note=a=b"),
    )
    run = commands.run_from_flags(namespace)
    assert run == {
        "pipeline": "ranker",
        "run_id": "r1",
        "variant": "candidate",
        "started_at": "2026-11-02T08:00:00+00:00",
        "finished_at": "2026-11-02T22:00:00Z",
        "workers": 8,
        "gpu_utilization": 0.38,
        "gpu_type": "A100",
        "gpu_hours": 100.0,
        "price_per_gpu_hour": 2.2,
        "quality_metric": "ndcg",
        "quality_value": 0.41,
        "data_stall_hours": 5.0,
        "checkpoint_hours": 1.0,
        "scheduling_wait_hours": 0.0,
        "mfu": 0.3,
        "tags": {"git": "4f1c", "note": "a=b"},
    }
    RunIn.model_validate(run)  # the payload is what the server accepts
    missing = "missing --run-id, --started-at, --finished-at, --workers "
    with pytest.raises(RecordError, match=missing):
        commands.run_from_flags(args("report", "--pipeline", "x", "--utilization", "0.3"))


# Against the app ---------------------------------------------------------------------


def runs_for(pipeline: str, n: int) -> list[dict[str, Any]]:
    return [make_run(pipeline=pipeline, run_id=f"r{i}", tags={"i": str(i)}) for i in range(n)]


def test_report_a_csv_then_rerun_then_bad_changed_and_unauthorized(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    path = write_csv(tmp_path / "runs.csv", runs_for("report-csv", 3))
    assert report(client, token, "--file", str(path)) == 0
    assert "3 runs stored: 3 created, 0 already there" in capsys.readouterr().out
    assert report(client, token, "--file", str(path)) == 0
    assert "0 created, 3 already there" in capsys.readouterr().out
    stored = client.get("/api/v1/runs", params={"pipeline": "report-csv"}).json()["runs"]
    assert sorted(r["run_id"] for r in stored) == ["r0", "r1", "r2"]

    bad = runs_for("report-csv", 4)
    bad[3]["gpu_utilization"] = 38
    assert report(client, token, "--file", str(write_csv(tmp_path / "bad.csv", bad))) == 1
    err = capsys.readouterr().err
    assert "bad.csv line 5 (run r3): gpu_utilization: must be a fraction" in err
    assert "did you mean 0.38?" in err

    changed = runs_for("report-csv", 3)
    changed[1]["workers"] = 16
    assert report(client, token, "--file", str(write_csv(tmp_path / "chg.csv", changed))) == 3
    err = capsys.readouterr().err
    assert "conflict (409" in err and "chg.csv line 3 (run r1): workers" in err

    assert report(client, "cad_not_a_token", "--file", str(path)) == 4
    assert "not allowed (401" in capsys.readouterr().err
    read_only = make_token(db, "read", name="read-only")
    assert report(client, read_only, "--file", str(path)) == 4


def test_report_from_flags_and_quiet(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    flags = (
        *("--pipeline", "report-flags", "--run-id", "f1", "--workers", "8"),
        *("--started-at", "2026-11-02T08:00:00+00:00", "--finished-at", "2026-11-02T22:00:00Z"),
        *("--utilization", "0.5", "--tag", "k=v"),
    )
    assert report(client, token, *flags) == 0
    assert "1 created" in capsys.readouterr().out
    assert report(client, token, *flags, "--quiet") == 0
    assert capsys.readouterr().out == ""
    [run] = client.get("/api/v1/runs", params={"pipeline": "report-flags"}).json()["runs"]
    assert (run["gpu_utilization"], run["tags"], run["gpu_hours"]) == (0.5, {"k": "v"}, 112)
    assert report(client, token, *flags[:-4], "--utilization", "50") == 1
    assert "run f1: --utilization must be a fraction" in capsys.readouterr().err


def test_batches_progress_and_indexes_across_batches(
    client: TestClient,
    db: Database,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commands, "BATCH_SIZE", 2)
    token = make_token(db, "ingest")
    runs = runs_for("report-batches", 5)
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    assert report(client, token, "--file", str(path), "--progress") == 0
    err = capsys.readouterr().err
    assert "] 2/5 runs" in err and "] 4/5 runs" in err and "[" + "#" * 30 + "] 5/5 runs" in err
    assert report(client, token, "--file", str(path), "--quiet") == 0
    assert "/5 runs" not in capsys.readouterr().err  # (the in-process app logs to stderr)

    runs.append(make_run(pipeline="report-batches", run_id="r5"))
    runs.append(make_run(pipeline="report-batches", run_id="r6", mfu=2))
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    assert report(client, token, "--file", str(path)) == 1
    err = capsys.readouterr().err
    # Checked before the first batch: r5 (line 6, valid) is not stored either.
    assert "runs.jsonl line 7 (run r6): mfu: 2 is not between 0 and 1" in err
    assert "nothing was stored" in err
    stored = client.get("/api/v1/runs", params={"pipeline": "report-batches"}).json()["runs"]
    assert sorted(r["run_id"] for r in stored) == ["r0", "r1", "r2", "r3", "r4"]


def test_server_unavailable_after_retries_is_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(make_run()))
    down = httpx.MockTransport(lambda _request: httpx.Response(503, json={"error": {}}))
    sleeps: list[float] = []
    namespace = args("report", "--token", "t", "--file", str(path))
    assert commands.run_report(namespace, transport=down, sleep=sleeps.append) == 5
    assert len(sleeps) == 7 and "server unavailable" in capsys.readouterr().err
    assert export_command.run_export(args("export"), transport=down, sleep=sleeps.append) == 5
    # cadence check and cadence plan say it the same way (one answer_with_client).
    capsys.readouterr()
    check = args("check", "--pipeline", "p", "--cadence", "2")
    assert run_check(check, transport=down, sleep=sleeps.append) == 5
    assert run_plan(args("plan"), transport=down, sleep=sleeps.append) == 5
    assert capsys.readouterr().err.count("server unavailable at") == 2


# Export and the round trip ------------------------------------------------------------


VARIED = [
    make_run(
        pipeline="trip-a",
        run_id="a-1",
        tags={"note": 'comma, "quote"\nnew line', "ünï": "çødé ✓"},
        price_per_gpu_hour=3.25,
        mfu=0.41,
        gpu_hours=100.5,
    ),
    make_run(
        pipeline="trip-a",
        run_id='a,2 "q"',
        variant="candidate",
        started_at="2026-11-03T08:00:00+05:30",
        finished_at="2026-11-03T20:30:00+05:30",
        interruptions=[
            {"lost_progress_hours": 0.1, "resume_hours": 0.2, "reschedule_hours": 0.3},
            {"lost_progress_hours": 1 / 3, "cause": "oom, again"},
        ],
        quality_value=0.1 + 0.2,
        tags={},
    ),
    make_run(
        pipeline="trip-b",
        run_id="b-1",
        quality_metric=None,
        quality_value=None,
        gpu_type="",
        interruptions=[],
        gpu_utilization=0,
    ),
]


def listed(app: TestClient) -> list[dict[str, Any]]:
    runs = app.get("/api/v1/runs", params={"limit": 1000}).json()["runs"]
    for run in runs:
        del run["id"], run["created_at"]
    return sorted(runs, key=lambda r: (r["pipeline"], r["run_id"]))


@pytest.fixture
def fresh_app(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    """A second app on its own freshly migrated SQLite file, with an ingest token."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    command.upgrade(alembic_config(url), "head")
    settings = Settings(database_url=url, default_price_per_gpu_hour=2.5)
    database = Database(make_engine(settings))
    try:
        with TestClient(create_app(settings, database=database)) as app:
            yield app, make_token(database, "ingest")
    finally:
        database.dispose()


def test_export_csv_and_jsonl(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"runs": VARIED}))
    assert report(client, make_token(db, "ingest"), "--file", str(path), "--quiet") == 0
    expected = client.get("/api/v1/runs", params={"pipeline": "trip-a"}).json()["runs"]

    assert export(client, "--pipeline", "trip-a") == 0  # csv on stdout, open read mode
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == list(records.EXPORT_COLUMNS)
    assert [r["run_id"] for r in rows] == [r["run_id"] for r in expected]
    by_id = {r["run_id"]: r for r in rows}
    assert json.loads(by_id["a-1"]["tags"]) == VARIED[0]["tags"]
    assert by_id["a-1"]["started_at"] == expected[-1]["started_at"]
    assert by_id["a-1"]["started_at"].startswith("2026-11-02T08:00:00")
    assert by_id["a-1"]["started_at"][19:] in ("Z", "+00:00")  # an offset
    assert by_id['a,2 "q"']["mfu"] == ""
    assert "exported 2 runs of 1 pipeline(s)" in err

    target = tmp_path / "out.jsonl"
    assert export(client, "--format", "jsonl", "--output", str(target)) == 0
    lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert {r["run_id"] for r in lines} >= {"a-1", 'a,2 "q"', "b-1"}
    assert [r for r in lines if r["pipeline"] == "trip-a"] == expected
    assert list(lines[0]) == list(records.EXPORT_COLUMNS)


def test_export_needs_a_token_when_reads_are_closed(
    db: Database, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = settings.model_copy(update={"read_access": "token"})
    with TestClient(create_app(closed, database=db)) as app:
        assert export(app) == 4
        assert "not allowed (401" in capsys.readouterr().err
        assert export(app, token=make_token(db, "read")) == 0


def test_round_trip_export_csv_into_a_fresh_database(
    client: TestClient,
    db: Database,
    tmp_path: Path,
    fresh_app: tuple[TestClient, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "varied.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in VARIED))
    assert report(client, make_token(db, "ingest"), "--file", str(source)) == 0
    exported = tmp_path / "export.csv"
    assert export(client, "--output", str(exported)) == 0

    second, token = fresh_app
    assert report(second, token, "--file", str(exported)) == 0
    assert "3 created, 0 already there" in capsys.readouterr().out
    original = listed(client)
    assert len(original) == 3
    assert listed(second) == original
    assert report(second, token, "--file", str(exported)) == 0  # and it is idempotent
    assert "0 created, 3 already there" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_deeply_nested_json_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """100,000 nested arrays exhaust the JSON parser's recursion: that was a
    RecursionError traceback and exit 1."""
    path = tmp_path / name
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    namespace = args("report", "--url", URL, "--token", "t", "--file", str(path))
    assert commands.run_report(namespace, transport=no_server()) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "Traceback" not in err
    where = "line 1" if name.endswith("jsonl") else "the file"
    assert where in err
