"""``promtool check metrics`` (Prometheus's own linter, /usr/bin/promtool from Debian's
prometheus package) exits 0 on what /metrics serves, with every family holding samples."""

from __future__ import annotations

import argparse
import shutil
import subprocess

from fastapi.testclient import TestClient

from app import cli
from tests.fixtures.builders import last_week_day, make_run

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def test_promtool_accepts_the_metrics(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    for i in range(3):
        when = last_week_day(i)  # the week /metrics reports, so every family has samples
        run = make_run(run_id=f"p-{i}", data_stall_hours=0.5, checkpoint_hours=0.2, **when)
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    text = client.get("/metrics").text
    assert "cadence_pipeline_weekly_badput_gpu_seconds{" in text  # with samples
    checked = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def test_no_help_text_prints_a_doubled_percent_sign() -> None:
    # argparse %-formats argument help but prints a description as written: "50%%" in a
    # description reads "50%%" on the screen.
    every = _parsers(cli.parser())
    assert len(every) > 10
    shown = {p.prog: p.format_help() for p in every}
    assert [prog for prog, text in shown.items() if "%%" in text] == []
    assert "above 50% uses" in shown["cadence enrich prometheus"].replace("\n", " ")
