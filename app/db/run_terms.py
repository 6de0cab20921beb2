"""One run's goodput and badput terms as SQL expressions, and the calendar buckets.

The analytics queries sum them over runs; the rollup table (:mod:`app.db.rollup`) keeps
the same sums per pipeline, variant, ISO week and month. :func:`app.planning.rollup.terms`
is the same arithmetic in Python, and the equivalence tests hold the two equal.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, and_, case, cast, func, literal

from app.db.models import Run
from app.planning.goodput import GoodputTotals
from app.planning.rollup import SUCCEEDED


def wall_clock(dialect: str) -> ColumnElement[Any]:
    """T in hours, computed by the database."""
    if dialect == "postgresql":
        # date_part returns float8; EXTRACT returns numeric since PostgreSQL 14, and the
        # weekly query uses this expression ~30 times (36.8 -> 19.4 ms on 1M runs). Typed
        # Float so that ``gpu_hours / T`` stays float8: untyped, SQLAlchemy casts T to
        # NUMERIC for a "true" division, which is slower and raised "value out of range:
        # underflow" converting a tiny numeric term back to float8.
        epoch = func.date_part("epoch", Run.finished_at - Run.started_at, type_=Float)
        return epoch / 3600.0
    return (
        func.julianday(Run.finished_at, type_=Float) - func.julianday(Run.started_at, type_=Float)
    ) * 24.0


def week_start(dialect: str) -> ColumnElement[Any]:
    """Monday of the run's ISO week (UTC)."""
    if dialect == "postgresql":
        return func.date_trunc("week", func.timezone("UTC", Run.started_at))
    return func.date(Run.started_at, "weekday 0", "-6 days")


def month_start(dialect: str) -> ColumnElement[Any]:
    """First day of the run's calendar month (UTC)."""
    if dialect == "postgresql":
        return func.date_trunc("month", func.timezone("UTC", Run.started_at))
    return func.date(Run.started_at, "start of month")


def greatest(a: ColumnElement[float], b: ColumnElement[float] | float) -> ColumnElement[float]:
    return case((a > b, a), else_=b)


def run_terms(
    backend: str, *, resumed_column: bool = True
) -> tuple[dict[str, ColumnElement[float]], dict[str, ColumnElement[float]]]:
    """Per-run goodput terms and badput GPU-hours by cause, as SQL expressions: the
    definitions of :func:`app.planning.rollup.terms` (which documents them, attempts
    that did not succeed, unmeasured ones and resumed progress included).
    ``resumed_column=False``: a schema before revision 0024 (a migration's rebuild),
    where no run resumed anything."""
    t = wall_clock(backend)
    # op('/'): a plain float8 division, without the NUMERIC cast SQLAlchemy adds to '/'.
    weff = Run.gpu_hours.op("/", return_type=Float)(t.self_group())
    failed = Run.outcome != SUCCEEDED
    unmeasured = Run.gpu_utilization.is_(None)
    u = func.coalesce(Run.gpu_utilization, 0.0)
    # Progress resumed from earlier attempts' checkpoints: only a succeeded attempt's.
    resumed_hours = Run.resumed_from_hours if resumed_column else literal(0.0, Float)
    resumed = case((failed, 0.0), else_=resumed_hours * weff)
    kinds = _Kinds(failed, unmeasured, resumed)
    return _goodput_terms(t, weff, u, kinds), _causes(weff, u, kinds)


class _Kinds:
    """What decides a run's terms: failed, unmeasured, and the resumed GPU-hours."""

    def __init__(
        self,
        failed: ColumnElement[bool],
        unmeasured: ColumnElement[bool],
        resumed: ColumnElement[float],
    ) -> None:
        self.failed, self.unmeasured, self.resumed = failed, unmeasured, resumed


def _goodput_terms(
    t: ColumnElement[float], weff: ColumnElement[float], u: ColumnElement[float], k: _Kinds
) -> dict[str, ColumnElement[float]]:
    """The :data:`~app.planning.rollup.GOODPUT_SUMS` terms of a run."""
    progress = greatest(
        weff
        * (
            t
            - Run.reschedule_hours
            - Run.resume_hours
            - Run.lost_progress_hours
            - Run.checkpoint_hours
        ),
        0.0,
    )
    busy = greatest(u * Run.gpu_hours - weff * Run.lost_progress_hours, 0.0)
    proxy = case((busy > progress, progress), else_=busy)
    # The resumed GPU-hours at this attempt's program ratio (rollup._program_ratio).
    ratio = case(
        (Run.mfu.is_not(None), Run.mfu),
        (progress > 0.0, proxy.op("/", return_type=Float)(progress)),
        else_=0.0,
    )
    program = case(
        (k.failed, 0.0),
        (Run.mfu.is_not(None), Run.mfu * (progress + k.resumed)),
        (k.unmeasured, 0.0),
        else_=proxy + ratio * k.resumed,
    )
    held = weff * (t - Run.reschedule_hours)
    runtime_loss = weff * (Run.resume_hours + Run.lost_progress_hours + Run.checkpoint_hours)
    return {
        "gpu_hours": cast(Run.gpu_hours, Float),
        "period": weff * (Run.scheduling_wait_hours + t),
        "unavailable": weff * (Run.scheduling_wait_hours + Run.reschedule_hours),
        "held": held,
        "runtime_loss": case((k.failed, held), else_=runtime_loss - k.resumed),
        "program": cast(program, Float),
        "mfu_hours": case((Run.mfu.is_not(None), Run.gpu_hours), else_=0.0),
        "unmeasured": case(
            (k.failed, 0.0),
            (and_(k.unmeasured, Run.mfu.is_(None)), held - runtime_loss + k.resumed),
            else_=0.0,
        ),
    }


def _causes(
    weff: ColumnElement[float], u: ColumnElement[float], k: _Kinds
) -> dict[str, ColumnElement[float]]:
    """A run's badput GPU-hours by cause (:data:`~app.planning.rollup.CAUSES`); resumed
    progress leaves failed attempts for productive (u) and other idle (1 - u) time."""
    measured_idle = (1.0 - u) * Run.gpu_hours
    failure_hours = Run.lost_progress_hours + Run.resume_hours + Run.reschedule_hours
    named = (Run.data_stall_hours + Run.checkpoint_hours + failure_hours) * weff
    scale = case((named > measured_idle, measured_idle / greatest(named, 1e-12)), else_=1.0)

    def measured(value: ColumnElement[float]) -> ColumnElement[float]:
        """``value`` for a succeeded attempt with a utilization figure, else 0."""
        return case((k.failed, 0.0), (k.unmeasured, 0.0), else_=value)

    return {
        "productive": measured(u * (Run.gpu_hours + k.resumed)),
        "idle": case(
            (k.failed, Run.gpu_hours),
            (k.unmeasured, -k.resumed),
            else_=measured_idle - u * k.resumed,
        ),
        "data_stall": measured(Run.data_stall_hours * weff * scale),
        "checkpoint": measured(Run.checkpoint_hours * weff * scale),
        "failure": measured(failure_hours * weff * scale),
        "other_idle": measured(greatest(measured_idle - named, 0.0) + (1.0 - u) * k.resumed),
        "failed": case((k.failed, Run.gpu_hours), else_=-k.resumed),
    }


def goodput_totals(m: Any) -> GoodputTotals:
    """GoodputTotals from a row with ``runs`` and the :data:`GOODPUT_SUMS` columns."""
    return GoodputTotals(
        runs=int(m["runs"]),
        gpu_hours=float(m["gpu_hours"]),
        period_gpu_hours=m["period"],
        unavailable_gpu_hours=m["unavailable"],
        held_gpu_hours=m["held"],
        runtime_loss_gpu_hours=m["runtime_loss"],
        program_gpu_hours=m["program"],
        mfu_gpu_hours=float(m["mfu_hours"]),
        unmeasured_progress_gpu_hours=float(m["unmeasured"]),
    )


def as_date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
