"""Builders for the client's tests (no server code: the package is tested on its own)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

WORKED_EXAMPLE_RUN = (Path(__file__).parent / "run.json").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test spools into its own directory, never the user's cache."""
    directory = tmp_path / "spool"
    monkeypatch.setenv("CADENCE_SPOOL_DIR", str(directory))
    return directory


def make_run(**overrides: Any) -> dict[str, Any]:
    """A valid run payload: the worked example's baseline (8 workers x 14 h at 38%), the
    run the server's tests build too (tests/fixtures/builders.py reads this file)."""
    run: dict[str, Any] = json.loads(WORKED_EXAMPLE_RUN)
    run.update(overrides)
    return run
