"""`make run` is for a person at a terminal: text log lines unless told otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def log_format_seen_by_make_run(env: dict[str, str]) -> list[str]:
    # CADENCE (the command each recipe line runs) is replaced by printenv: the recipe
    # then prints the environment the real commands would get, and starts nothing.
    out = subprocess.run(
        ["make", "-s", "run", "CADENCE=printenv CADENCE_LOG_FORMAT; true"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_logs_text_unless_json_is_asked_for() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CADENCE_LOG_FORMAT"}
    assert log_format_seen_by_make_run(env) == ["text", "text", "text"]
    assert log_format_seen_by_make_run({**env, "CADENCE_LOG_FORMAT": "json"})[0] == "json"
