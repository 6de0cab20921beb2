"""The causes of badput: the one list that every chart, table, export, metric and lever
reads, in the order they are shown, and the one label of each."""

from __future__ import annotations

IDLE_CAUSES = ("data_stall", "checkpoint", "failure", "other_idle")
"""What a succeeded run's measured idle time is split into (``economics.Badput``'s fields;
methodology.md §2)."""

BADPUT_CAUSES = (*IDLE_CAUSES, "failed")
"""Every cause: the idle ones and "failed", every GPU-hour of the attempts that did not
succeed (failed, preempted, cancelled)."""

CAUSE_LABELS: dict[str, str] = {
    "data_stall": "Data-loading stall",
    "checkpoint": "Checkpoint writes",
    "failure": "Failure loss",
    "other_idle": "Other idle",
    "failed": "Failed attempts",
}
