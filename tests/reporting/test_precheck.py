"""The client's check of a file before ``cadence report`` posts it holds the server's
rules: its copies of the server's lists and limits are the server's, and on a set of
runs (each good but for one value) it refuses exactly what the server refuses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from cadence_client.commands import precheck

from app.runs.schemas import MAX_TAGS, OUTCOMES, UTILIZATION_SOURCES
from app.runs.validation import MAX_WALL_CLOCK_HOURS
from app.schemas_common import SLUG_RE
from app.settings import Settings
from app.sources import checks
from tests.fixtures.builders import make_run

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def test_the_lists_and_limits_are_the_servers() -> None:
    assert precheck.OUTCOMES == OUTCOMES
    assert precheck.SOURCES == UTILIZATION_SOURCES
    assert precheck.SLUG.pattern == SLUG_RE.pattern
    assert precheck.FUTURE_TOLERANCE.total_seconds() / 3600 == (
        Settings.model_fields["run_future_tolerance_hours"].default
    )
    assert (
        Settings.model_fields["run_future_tolerance_hours"].default == checks.FUTURE_TOLERANCE_HOURS
    )
    assert precheck.LONGEST.total_seconds() / 3600 == MAX_WALL_CLOCK_HOURS
    assert MAX_TAGS == 50


CASES: list[dict[str, Any]] = [
    {},
    {"started_at": "2030-01-05T08:00:00+00:00", "finished_at": "2030-01-05T09:00:00+00:00"},
    {"started_at": "2026-11-02T08:00:00"},  # no offset
    {"started_at": "9999-12-31T23:00:00-01:00"},
    {"finished_at": "2026-11-02T07:00:00+00:00"},
    {"started_at": "2026-11-02T08:00:00.1Z", "finished_at": "2026-11-02T22:00:00.123456Z"},
    {"workers": 0},
    {"workers": 2.5},
    {"workers": True},
    {"gpu_utilization": 38},
    {"gpu_utilization": -0.1},
    {"gpu_utilization": 1.0},
    {"mfu": 2},
    {"price_per_gpu_hour": 10_001},
    {"quality_value": 1e13},
    {"data_stall_hours": -1},
    {"outcome": "exploded"},
    {"outcome": "failed"},
    {"outcome": "running"},  # with a finish and a utilization: refused by both
    {"outcome": "running", "finished_at": None, "gpu_utilization": None},  # a start: taken
    {"finished_at": None},  # no finish and not running: refused by both
    {"utilization_source": "guess"},
    {"pipeline": "Not A Slug"},
    {"run_id": "x" * 201},
    {"typo_field": 1},
]


@pytest.mark.parametrize("change", CASES, ids=[str(sorted(c)) for c in CASES])
def test_the_client_refuses_what_the_server_refuses(change: dict[str, Any]) -> None:
    run = {
        **make_run(started_at="2026-11-02T08:00:00+00:00", finished_at="2026-11-02T22:00:00+00:00"),
        **change,
    }
    server = checks.problems(run, NOW)
    client = precheck.problems(run, NOW)
    assert bool(client) == bool(server), (client, server)
