"""Exit codes as sacct writes them: did a job's steps fail? Pure.

``DerivedExitCode`` is the highest exit code of the job's steps (``3:0``: code 3,
signal 0); a job whose ``srun`` step failed while its batch script exited 0 is
``COMPLETED`` with ``DerivedExitCode 3:0``. ``sacct -P`` writes ``code:signal``;
``sacct --json`` writes ``{"status", "return_code", "signal"}``, with numbers as
``{set, infinite, number}`` from Slurm 23.02 on and plain numbers before.
"""

from __future__ import annotations

from typing import Any


def text_failure(text: str) -> str:
    """``"3:0"`` -> ``"3:0"`` (failed); ``"0:0"``, empty or unreadable -> ``""``."""
    code, _, signal = text.strip().partition(":")
    try:
        return text.strip() if int(code or 0) or int(signal or 0) else ""
    except ValueError:
        return ""


def _number(value: Any) -> int:
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else 0
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def json_failure(value: Any) -> str:
    """An exit code of ``sacct --json`` -> ``"3:0"`` when it failed, else ``""``."""
    if not isinstance(value, dict):
        return ""
    code = _number(value.get("return_code"))
    signal = value.get("signal") or {}
    signal_id = (
        _number(signal.get("signal_id", signal.get("id"))) if isinstance(signal, dict) else 0
    )
    if code or signal_id:
        return f"{code}:{signal_id}"
    return ""


def json_step_name(step: dict[str, Any], job_id: str) -> str:
    """``123.0`` or ``123.batch``: Slurm 23.02+ writes ``step.id`` whole, 22.05 its tail."""
    found = step.get("step")
    found = found if isinstance(found, dict) else {}
    name = str(found["id"] if found.get("id") is not None else found.get("name") or "?")
    return name if "." in name else f"{job_id}.{name}"
