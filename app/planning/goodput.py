"""Goodput: scheduling x runtime x program (methodology.md §3, after Google's ML goodput and
Meta's effective-training-time accounting).

Per run, with T the wall clock, Q the queue wait, and per interruption i the lost progress
tch_i, resume time trm_i and reschedule time tre_i:

- Scheduling  S = (P - Q - sum tre) / P, with P = Q + T.
- Runtime     R = (T - tc - sum tre) / (T - sum tre), tc = sum (trm + tch) + checkpoint_hours.
  Blocking checkpoint writes are counted by adding ``checkpoint_hours`` to tc: while a
  synchronous checkpoint is written the run holds its GPUs but makes no progress.
- Program     MFU when reported. Otherwise a utilization proxy: u is a time-average over
  the whole run, so the pauses R removes are already idle time inside 1 - u; the proxy
  is the busy share of the forward-progress time,
  P = (u T - sum tch) / (T - tc - sum tre), so that R * P = (u T - sum tch) / (T - sum tre)
  and nothing is counted twice (methodology.md §3: T = 10, u = 0.5, C = 1, tch = trm = 0.5
  gives R = 0.8, P = 0.5625, overall 0.45, not 0.40).
- Overall     S * R * Program. Each factor is clamped to [0, 1].

Across many runs the factors are ratios of GPU-hour weighted sums (never a mean of
ratios): each run's hours are weighted by its effective workers Weff = G / T, so a run
counts in proportion to the GPU-hours it bought. Every sum is in :class:`GoodputTotals`
and can be computed in SQL, so weekly trends are one GROUP BY.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.planning.model import RunFacts


@dataclass(frozen=True)
class GoodputTotals:
    """Plain sums over runs, each computable with SQL ``SUM()``.

    With the per-run columns of the ``run`` table (``workers``, ``gpu_hours``,
    ``scheduling_wait_hours``, ``checkpoint_hours``, ``mfu``, ``gpu_utilization`` and the
    per-run interruption sums ``lost_progress_hours``, ``resume_hours``,
    ``reschedule_hours``), let ``T`` be the wall-clock expression (Postgres:
    ``EXTRACT(EPOCH FROM finished_at - started_at) / 3600.0``; SQLite:
    ``(julianday(finished_at) - julianday(started_at)) * 24.0``) and
    ``weff = gpu_hours / T`` (T > 0 is enforced by the schema). Then::

        runs                  = COUNT(*)
        gpu_hours             = SUM(gpu_hours)
        period_gpu_hours      = SUM(weff * (scheduling_wait_hours + T))
        unavailable_gpu_hours = SUM(weff * (scheduling_wait_hours + reschedule_hours))
        held_gpu_hours        = SUM(weff * (T - reschedule_hours))
        runtime_loss_gpu_hours= SUM(weff * (resume_hours + lost_progress_hours
                                            + checkpoint_hours))
        progress              = weff * (T - reschedule_hours - resume_hours
                                        - lost_progress_hours - checkpoint_hours)
        program_gpu_hours     = SUM(CASE WHEN mfu IS NOT NULL THEN mfu * progress
                                    ELSE clamp(gpu_utilization * gpu_hours
                                               - weff * lost_progress_hours, 0, progress))
        mfu_gpu_hours         = SUM(CASE WHEN mfu IS NOT NULL THEN gpu_hours ELSE 0 END)

    Attempts that did not succeed and succeeded ones without a utilization figure are
    the exceptions :func:`app.planning.rollup.terms` documents (all held time lost; no
    program term); ``unmeasured_progress_gpu_hours`` is the forward progress of the
    unmeasured ones without MFU, which the program factor leaves out.

    Note ``weff * T = gpu_hours``, so e.g. period_gpu_hours can also be written
    ``SUM(gpu_hours + gpu_hours * scheduling_wait_hours / T)``. Group by ISO week of
    ``started_at`` and pass each row to :func:`goodput_from_totals`.
    """

    runs: int
    gpu_hours: float
    period_gpu_hours: float
    unavailable_gpu_hours: float
    held_gpu_hours: float
    runtime_loss_gpu_hours: float
    program_gpu_hours: float
    mfu_gpu_hours: float
    unmeasured_progress_gpu_hours: float = 0.0

    def __add__(self, other: GoodputTotals) -> GoodputTotals:
        return GoodputTotals(
            runs=self.runs + other.runs,
            gpu_hours=self.gpu_hours + other.gpu_hours,
            period_gpu_hours=self.period_gpu_hours + other.period_gpu_hours,
            unavailable_gpu_hours=self.unavailable_gpu_hours + other.unavailable_gpu_hours,
            held_gpu_hours=self.held_gpu_hours + other.held_gpu_hours,
            runtime_loss_gpu_hours=self.runtime_loss_gpu_hours + other.runtime_loss_gpu_hours,
            program_gpu_hours=self.program_gpu_hours + other.program_gpu_hours,
            mfu_gpu_hours=self.mfu_gpu_hours + other.mfu_gpu_hours,
            unmeasured_progress_gpu_hours=self.unmeasured_progress_gpu_hours
            + other.unmeasured_progress_gpu_hours,
        )


EMPTY_TOTALS = GoodputTotals(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Goodput:
    """The three goodput factors and their product, each in [0, 1].

    All four are None when there were no runs. ``program_is_proxy`` is True when any of
    the GPU-hours lacked an MFU figure, so utilization stood in for it.
    """

    scheduling: float | None
    runtime: float | None
    program: float | None
    overall: float | None
    program_is_proxy: bool
    runs: int = 0
    gpu_hours: float = 0.0


@dataclass(frozen=True)
class ProgramGoodput:
    """Program goodput of one run: MFU, or utilization when ``is_proxy``."""

    value: float
    is_proxy: bool


def _clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


def _share(numerator: float, denominator: float) -> float:
    """numerator / denominator clamped to [0, 1]; 0 when nothing was held or paid for."""
    if denominator <= 0.0:
        return 0.0
    return _clamp01(numerator / denominator)


def run_totals(run: RunFacts) -> GoodputTotals:
    """The :class:`GoodputTotals` of a single run (the per-run terms of the SQL sums)."""
    weff = run.effective_workers
    q, t = run.scheduling_wait_hours, run.wall_clock_hours
    tre = run.reschedule_hours
    progress = max(
        0.0, weff * (t - tre - run.resume_hours - run.lost_progress_hours - run.checkpoint_hours)
    )
    if run.mfu is not None:
        program = run.mfu * progress
    else:
        busy = run.gpu_utilization * run.gpu_hours - weff * run.lost_progress_hours
        program = min(progress, max(0.0, busy))
    return GoodputTotals(
        runs=1,
        gpu_hours=run.gpu_hours,
        period_gpu_hours=weff * (q + t),
        unavailable_gpu_hours=weff * (q + tre),
        held_gpu_hours=weff * (t - tre),
        runtime_loss_gpu_hours=weff
        * (run.resume_hours + run.lost_progress_hours + run.checkpoint_hours),
        program_gpu_hours=program,
        mfu_gpu_hours=run.gpu_hours if run.mfu is not None else 0.0,
    )


def goodput_from_totals(t: GoodputTotals) -> Goodput:
    """Goodput factors from summed GPU-hours (methodology.md §3, GPU-hour weighted):

    - scheduling = (period - unavailable) / period
    - runtime    = (held - runtime_loss) / held   (0 if nothing was held)
    - program    = program_gpu_hours / (held - runtime_loss - unmeasured_progress), the
      forward-progress GPU-hours (MFU-weighted, or the utilization proxy's useful busy
      GPU-hours) of the attempts whose program term is known
    - overall    = scheduling * runtime * program

    Each factor is clamped to [0, 1]. With ``runs == 0`` every factor is None.
    """
    if t.runs == 0:
        return Goodput(None, None, None, None, program_is_proxy=False)
    scheduling = _share(t.period_gpu_hours - t.unavailable_gpu_hours, t.period_gpu_hours)
    runtime = _share(t.held_gpu_hours - t.runtime_loss_gpu_hours, t.held_gpu_hours)
    forward = t.held_gpu_hours - t.runtime_loss_gpu_hours - t.unmeasured_progress_gpu_hours
    program = _share(t.program_gpu_hours, forward)
    if forward <= 1e-12 and t.unmeasured_progress_gpu_hours > 0:
        # Every attempt that made progress is unmeasured: the program factor is unknown,
        # and overall goodput is scheduling x runtime (the factors the timings give).
        program = 1.0
    proxy = t.mfu_gpu_hours < t.gpu_hours * (1.0 - 1e-9)
    return Goodput(
        scheduling=scheduling,
        runtime=runtime,
        program=program,
        overall=scheduling * runtime * program,
        program_is_proxy=proxy,
        runs=t.runs,
        gpu_hours=t.gpu_hours,
    )


def run_goodput(run: RunFacts) -> Goodput:
    """Goodput of one run: :func:`goodput_from_totals` of :func:`run_totals`."""
    return goodput_from_totals(run_totals(run))


def scheduling_goodput(run: RunFacts) -> float:
    """S = (P - Q - sum tre) / P with P = Q + T, clamped to [0, 1] (methodology.md §3)."""
    p = run.scheduling_wait_hours + run.wall_clock_hours
    return _share(p - run.scheduling_wait_hours - run.reschedule_hours, p)


def runtime_goodput(run: RunFacts) -> float:
    """R = (T - tc - sum tre) / (T - sum tre), clamped to [0, 1] (methodology.md §3).

    tc = sum(trm + tch) + checkpoint_hours: blocking checkpoint writes are added to the
    interruption cost tc because the GPUs are held but make no progress. R is 0 when the
    whole wall clock was spent rescheduling.
    """
    tre = run.reschedule_hours
    tc = run.resume_hours + run.lost_progress_hours + run.checkpoint_hours
    held = run.wall_clock_hours - tre
    return _share(held - tc, held)


def program_goodput(run: RunFacts) -> ProgramGoodput:
    """MFU = achieved FLOP/s / peak FLOP/s when reported; else the utilization proxy
    P = (u T - sum tch) / (T - tc - sum tre), clamped to [0, 1] (module docstring)."""
    if run.mfu is not None:
        return ProgramGoodput(run.mfu, is_proxy=False)
    t = run.wall_clock_hours
    progress = t - run.reschedule_hours - run.resume_hours - run.lost_progress_hours
    progress -= run.checkpoint_hours
    busy = run.gpu_utilization * t - run.lost_progress_hours
    return ProgramGoodput(_share(busy, progress), is_proxy=True)


def overall_goodput(run: RunFacts) -> float:
    """Overall = S * R * Program for one run (methodology.md §3)."""
    return scheduling_goodput(run) * runtime_goodput(run) * program_goodput(run).value


overall = overall_goodput


def program_basis(mfu_gpu_hours: float, gpu_hours: float) -> str:
    """What measured the program factor, GPU-hour weighted: "mfu" when every GPU-hour
    had an MFU figure, "utilization" when none had (the proxy), "mixed" otherwise.
    Examples: (80, 80) -> "mfu"; (0, 80) -> "utilization"; (80, 88) -> "mixed" (8
    GPU-hours of scaling probes without MFU); (0, 0), no runs -> "utilization"."""
    if mfu_gpu_hours <= 0.0:
        return "utilization"
    return "mfu" if mfu_gpu_hours >= gpu_hours * (1.0 - 1e-9) else "mixed"
