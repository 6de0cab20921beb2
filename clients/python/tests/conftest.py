"""Builders for the client's tests (no server code: the package is tested on its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test spools into its own directory, never the user's cache."""
    directory = tmp_path / "spool"
    monkeypatch.setenv("CADENCE_SPOOL_DIR", str(directory))
    return directory


def make_run(**overrides: Any) -> dict[str, Any]:
    """A valid run payload: 8 workers x 14 h at 38% utilization."""
    run: dict[str, Any] = {
        "pipeline": "ranker",
        "run_id": "run-1",
        "variant": "baseline",
        "started_at": "2026-11-02T08:00:00+00:00",
        "finished_at": "2026-11-02T22:00:00+00:00",
        "workers": 8,
        "gpu_utilization": 0.38,
        "tags": {"team": "ranking"},
    }
    run.update(overrides)
    return run
