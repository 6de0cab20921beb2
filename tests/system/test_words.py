"""Every message a person reads names the field in their terms, the rule and a likely
fix: a sample of API errors, CLI errors and empty states held to that (issue 28, item 4).

Not in any of them: pydantic's phrasing ("Input should be", "Field required"), and, in
the CLI's output, the request body's places (``runs.0.gpu_utilization``) or API paths.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cadence_client.commands.check import run_check
from cadence_client.commands.evaluations import run as run_evaluations
from cadence_client.commands.report import run_report
from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import URL, args, through

PYDANTIC = re.compile(
    r"Input should be|Field required|value is not a valid|Value error|validation error for|"
    r"Extra inputs are not permitted|type=\w+|ensure this value",
    re.IGNORECASE,
)
BODY_PLACE = re.compile(r"\b(body\.|query\.)?(runs|evaluations)\.\d+\.")
# A rule a reason states: a bound, a type, a choice, a shape, a relation.
RULE = re.compile(
    r"must|required|at least|at most|one of|expected|unknown|more than|after|before|"
    r"not a |no such|number|looks like",
    re.IGNORECASE,
)


def plain(text: str) -> None:
    assert not PYDANTIC.search(text), text


# --- the API ------------------------------------------------------------------------------

BAD_RUNS = [
    ({"gpu_utilization": 38}, "gpu_utilization", "did you mean 0.38?"),
    ({"workers": 0}, "workers", "must be at least 1"),
    ({"workers": "eight"}, "workers", "whole number"),
    ({"started_at": None}, "started_at", ""),
    ({"finished_at": "2026-11-02T07:00:00+00:00"}, "finished_at", "after started_at"),
    ({"outcome": "exploded"}, "outcome", "one of"),
    ({"gpu_utilizaton": 0.4}, "gpu_utilizaton", "unknown field"),
    ({"mfu": 2}, "mfu", "at most 1"),
    ({"gpu_hours": -3}, "gpu_hours", "must be greater than 0"),  # not "at least 1e-09"
    ({"resumed_from_hours": -1}, "resumed_from_hours", "must be at least 0"),
]


@pytest.mark.parametrize(("change", "field", "words"), BAD_RUNS)
def test_a_refused_run_names_its_field_and_the_rule(
    client: TestClient,
    ingest_headers: dict[str, str],
    change: dict[str, Any],
    field: str,
    words: str,
) -> None:
    run = {k: v for k, v in make_run(pipeline="words", **change).items() if v is not None}
    for path, body, place in (
        ("/api/v1/runs", run, field),
        ("/api/v1/runs/batch", {"runs": [make_run(pipeline="words"), run]}, f"runs.1.{field}"),
    ):
        answer = client.post(path, json=body, headers=ingest_headers)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        plain(error["message"])
        [item] = [f for f in error["fields"] if f["field"] == place]
        plain(item["reason"])
        assert RULE.search(item["reason"]) and words in item["reason"], item
        assert field in error["message"], error


def test_a_bad_path_parameter_is_named_as_the_url_holds_it(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    # The route's parameter is "pk"; the URL holds a run id, and the docs call it {id}.
    answer = client.get("/api/v1/runs/abc", headers=admin_headers)
    assert answer.status_code == 422
    [item] = answer.json()["error"]["fields"]
    assert item == {
        "field": "id",
        "reason": "must be a whole number, e.g. 8 (the run id in the URL path)",
    }
    assert "pk" not in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"price_per_gpu_hour": -1}, "price_per_gpu_hour"),
        ({"monthly_budget_usd": "lots"}, "monthly_budget_usd"),
        ({"runs_per_week": 0}, "runs_per_week"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_settings_name_the_setting_and_the_rule(
    client: TestClient, admin_headers: dict[str, str], body: dict[str, Any], field: str
) -> None:
    answer = client.put("/api/v1/pipelines/words", json=body, headers=admin_headers)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    plain(json.dumps(error))
    [item] = [f for f in error["fields"] if f["field"] == field]
    assert RULE.search(item["reason"]), item


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"utilization_target": "2"}, "utilization_target"),
        ({"utilization_target": "high"}, "utilization_target"),
        ({"workers": "0"}, "workers"),
        ({"cadences": "often"}, "cadences"),
        ({"failure_rate": "-1"}, "failure_rate"),
    ],
)
def test_bad_what_ifs_name_the_assumption_and_the_rule(
    client: TestClient, ingest_headers: dict[str, str], query: dict[str, str], field: str
) -> None:
    client.post("/api/v1/runs", json=make_run(pipeline="words"), headers=ingest_headers)
    answer = client.get("/api/v1/pipelines/words/projection", params=query)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    plain(json.dumps(error))
    assert any(f["field"] == field and RULE.search(f["reason"]) for f in error["fields"]), error


# --- the CLI ------------------------------------------------------------------------------


def cli_words(err: str) -> list[str]:
    """The CLI's own lines (the in-process server logs to the same stderr)."""
    return [
        line
        for line in err.splitlines()
        if line.strip() and not line.startswith(("{", "INFO", "WARNING"))
    ]


def held_to_the_rule(lines: list[str]) -> None:
    assert lines
    for line in lines:
        plain(line)
        assert not BODY_PLACE.search(line), line
        assert "/api/" not in line, line


def test_cadence_report_names_the_line_the_run_and_the_column(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    runs = [
        make_run(pipeline="words", run_id="r0", retraining_id="nightly-42"),
        make_run(pipeline="words", run_id="r1", retraining_id="nightly-42", gpu_utilization=1.5),
        make_run(pipeline="words", run_id="r2", workers=0),
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    namespace = args("report", "--url", URL, "--token", token, "--file", str(path))
    assert run_report(namespace, transport=through(client, []), sleep=pytest.fail) == 1
    lines = cli_words(capsys.readouterr().err)
    held_to_the_rule(lines)
    # Every run is checked on this machine before the first is sent (issue 36 item 1):
    # the first bad one is named by its line, run and field, then how many more.
    assert lines == [
        f"cadence: {path} line 2 (run r1): gpu_utilization: must be a fraction between 0 "
        "and 1; 1.5 looks like a percentage: did you mean 0.015? (1 more bad run after it)",
        f"cadence: nothing was stored: every run of {path} is checked before the first is sent",
    ]


def test_cadence_report_from_flags_names_the_flags(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    flags = (
        *("--pipeline", "words", "--run-id", "f1", "--workers", "8"),
        *("--started-at", "2026-11-02T08:00:00+00:00", "--finished-at", "2026-11-02T07:00:00Z"),
        *("--utilization", "38", "--mfu", "3"),
    )
    namespace = args("report", "--url", URL, "--token", token, *flags)
    assert run_report(namespace, transport=through(client, []), sleep=pytest.fail) == 1
    lines = cli_words(capsys.readouterr().err)
    held_to_the_rule(lines)
    assert "  run f1: --utilization must be a fraction between 0 and 1; 38 looks like a " in (
        "\n".join(lines)
    )
    assert any(line.startswith("  run f1: --mfu must be at most 1") for line in lines), lines


def test_cadence_report_evaluations_and_check_say_it_once_in_plain_words(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client.post("/api/v1/runs", json=make_run(pipeline="words"), headers=ingest_headers)
    path = tmp_path / "evals.json"
    path.write_text(json.dumps([{"run_id": "r1", "evaluated_at": "yesterday", "value": 0.4}]))
    namespace = args(
        "report-evaluations", "--url", URL, "--token", make_token(db, "ingest", name="evals"),
        *("--pipeline", "words", "--file", str(path)),
    )  # fmt: skip
    assert run_evaluations(namespace, transport=through(client, [])) == 1
    lines = cli_words(capsys.readouterr().err)
    held_to_the_rule(lines)
    assert any(f"{path} evaluation 1 (run r1): evaluated_at" in line for line in lines), lines

    namespace = args("check", "--url", URL, "--pipeline", "words", "--utilization-target", "2")
    assert run_check(namespace, transport=through(client, []), sleep=pytest.fail) == 2
    lines = cli_words(capsys.readouterr().err)
    held_to_the_rule(lines)
    assert len([line for line in lines if "--utilization-target" in line]) == 1, lines
    assert "must be" in "\n".join(lines)


# --- empty states -------------------------------------------------------------------------


def test_one_empty_state_box_per_missing_thing(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    # A pipeline without runs lacks runs, evaluations, scaling probes and alert rules:
    # one box for each, not fifteen (eleven of them "no runs" in other words). The first
    # box about runs is the cost section's, at the top.
    client.put("/api/v1/pipelines/quiet", json={"display_name": "Quiet"}, headers=admin_headers)
    page = client.get("/pipelines/quiet", headers={"Accept": "text/html"}).text
    boxes = [
        re.sub(r"<[^>]+>", "", t).strip()
        for t in re.findall(r'<p class="empty"[^>]*>(.*?)</p>', page, re.DOTALL)
    ]
    assert [b.split(":")[0].split(".")[0] for b in boxes] == [
        "No runs yet",
        "No decay curve yet",
        "No scaling probes yet",
        "No alert rules yet",
    ], boxes
    assert 'data-empty="cost"' in page


def test_empty_states_say_what_to_do_without_api_paths(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    client.put("/api/v1/pipelines/quiet", json={"display_name": "Quiet"}, headers=admin_headers)
    shown = []
    for path in ("/pipelines/quiet", "/review"):
        page = client.get(path, headers={"Accept": "text/html"})
        assert page.status_code == 200, path
        shown += re.findall(r'<p class="empty"[^>]*>(.*?)</p>', page.text, re.DOTALL)
    assert shown
    for text in shown:
        words = re.sub(r"<[^>]+>", "", text)
        assert "`" not in words, words  # commands are set as code, not in backticks
        plain(words)
        assert "/api/" not in words and not BODY_PLACE.search(words), words
        assert re.search(
            r"report|record|appear|set|import|add|post|choose", words, re.IGNORECASE
        ), words
