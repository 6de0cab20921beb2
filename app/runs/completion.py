"""A running attempt completed: the post of its finish, under the same (pipeline, run_id).

An attempt may be reported at its start (``outcome: "running"``, no ``finished_at``);
the post with its finish and final outcome then updates the stored row in place (200,
not 409), adds it to the rollups and moves its variant's change counter, in the
transaction of the ingest. The start's identity must match: the same variant, start and
retraining; anything else is a conflict, named by :mod:`app.runs.conflicts`.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.db import rollup
from app.db.engine import WriteSession
from app.db.models import Interruption, Run
from app.pipelines.service import PipelineRef
from app.runs.schemas import RunIn
from app.runs.validation import interruption_values, stored_values

IDENTITY = ("variant", "started_at", "retraining_id")


def completes(row: Run, run: RunIn) -> bool:
    """Whether ``run`` is the finish of the stored running attempt ``row``."""
    if row.outcome != "running" or run.outcome == "running":
        return False
    new = stored_values(run)
    return all(getattr(row, name) == new[name] for name in IDENTITY)


def complete(
    session: WriteSession,
    runs: Sequence[RunIn],
    pipelines: dict[str, PipelineRef],
    existing: dict[tuple[int, str], Run],
) -> dict[tuple[int, str], Run]:
    """Complete the stored running attempts these runs finish; the completed rows by key.

    The price frozen at the start stands unless the finish names its own: spend never
    moves with a later change of the pipeline's price."""
    done: dict[tuple[int, str], Run] = {}
    for run in runs:
        key = (pipelines[run.pipeline].id, run.run_id)
        row = existing.get(key)
        if row is None or key in done or not completes(row, run):
            continue
        for name, value in stored_values(run).items():
            setattr(row, name, value)
        if run.price_per_gpu_hour is not None:
            row.billed_price_per_gpu_hour = run.price_per_gpu_hour
        row.interruptions = [Interruption(**v) for v in interruption_values(run)]
        done[key] = row
    if done:
        session.flush()
        rollup.add_completed(session, sorted(row.id for row in done.values()))
    return done
