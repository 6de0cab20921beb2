"""The cloud bill's GPU spend held against the recorded runs (docs/finops.md).

A bill line is a charge for one resource (an instance, a node) over a charge period. A
run *holds* the resources its ``cloud_resource_id`` tag names from its start to its
finish. Within one UTC month:

- a line's **billed** cost is its EffectiveCost times the share of its charge period
  inside the month;
- the part the runs **explain** is the billed cost times the share of the charge period
  that some run held the resource (the union of the runs' intervals, so two runs at once
  on one node explain its hours once): a 24-hour charge for an instance that ran one
  10-hour attempt is 10/24 explained;
- a line several pipelines held is shared: each explains its own held hours (scaled down
  if together they exceed the period), and the rest is shared in proportion to them;
- a line for a resource no run held during its period (an hour between two runs) goes
  to the pipelines that held the resource that month, in proportion to their use, all
  unexplained (GPUs paid for while no run held them);
- a line for a resource no run held that month belongs to the pipeline its own
  ``cadence_pipeline`` tag names (a reservation kept for it, all unexplained), else to
  no pipeline (*unattributed*: untagged instances).

Pure: datetimes and floats in, figures out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.planning.resource_ids import holding_keys, line_keys
from app.planning.resource_ids import resource_tail as resource_tail  # re-exported

HOUR = 3600.0


@dataclass(frozen=True)
class BillLine:
    start: datetime
    end: datetime
    cost: float  # EffectiveCost over the whole charge period, in the bill's currency
    gpu_hours: float  # GPU-hours billed over the whole charge period
    resource_id: str
    pipeline_tag: str | None = None


@dataclass(frozen=True)
class Holding:
    """A run holding a resource from ``start`` to ``end``."""

    pipeline: str
    resource_id: str
    start: datetime
    end: datetime


@dataclass
class Figures:
    billed_usd: float = 0.0
    explained_usd: float = 0.0
    billed_gpu_hours: float = 0.0
    explained_gpu_hours: float = 0.0
    lines: int = 0

    @property
    def unexplained_usd(self) -> float:
        return self.billed_usd - self.explained_usd

    @property
    def effective_price_per_gpu_hour(self) -> float | None:
        """What the bill charged per GPU-hour, discounts and commitments included."""
        return self.billed_usd / self.billed_gpu_hours if self.billed_gpu_hours > 0 else None

    @property
    def explained_share(self) -> float | None:
        return self.explained_usd / self.billed_usd if self.billed_usd > 0 else None


@dataclass
class Reconciliation:
    pipelines: dict[str, Figures] = field(default_factory=dict)
    unattributed: Figures = field(default_factory=Figures)

    def of(self, pipeline: str) -> Figures:
        return self.pipelines.get(pipeline, Figures())

    def total(self) -> Figures:
        """Every line of the month: the pipelines' figures and the unattributed ones."""
        out = Figures()
        for f in [*self.pipelines.values(), self.unattributed]:
            out.billed_usd += f.billed_usd
            out.explained_usd += f.explained_usd
            out.billed_gpu_hours += f.billed_gpu_hours
            out.explained_gpu_hours += f.explained_gpu_hours
            out.lines += f.lines
        return out


def hours(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds() / HOUR)


def held_hours(
    start: datetime, end: datetime, intervals: Iterable[tuple[datetime, datetime]]
) -> float:
    """Hours of [start, end) covered by the union of ``intervals``."""
    clipped = sorted((max(s, start), min(e, end)) for s, e in intervals if s < end and e > start)
    total, reach = 0.0, start
    for s, e in clipped:
        if e > reach:
            total += hours(max(s, reach), e)
            reach = e
    return total


def split_line(period_hours: float, held: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Per pipeline, (share of the line billed to it, share it explains), from the hours
    each held the resource within a period of ``period_hours``."""
    total = sum(held.values())
    if total <= 0 or period_hours <= 0:
        return {}
    scale = min(1.0, period_hours / total)
    explained = {p: h * scale / period_hours for p, h in held.items()}
    rest = 1.0 - sum(explained.values())
    return {p: (explained[p] + rest * h / total, explained[p]) for p, h in held.items()}


def _add(figures: Figures, cost: float, gpu_hours: float, billed: float, explained: float) -> None:
    figures.billed_usd += cost * billed
    figures.explained_usd += cost * explained
    figures.billed_gpu_hours += gpu_hours * billed
    figures.explained_gpu_hours += gpu_hours * explained
    figures.lines += 1


def _users(
    spans: Mapping[str, dict[str, list[tuple[datetime, datetime]]]], resource_id: str
) -> dict[str, list[tuple[datetime, datetime]]]:
    """Per pipeline, the intervals its runs held ``resource_id`` (the forms that join:
    ``app.planning.resource_ids``)."""
    users: dict[str, list[tuple[datetime, datetime]]] = {}
    for key in sorted(line_keys(resource_id)):
        for pipeline, intervals in spans.get(key, {}).items():
            users.setdefault(pipeline, []).extend(intervals)
    return users


def reconcile(
    lines: Iterable[BillLine],
    holdings: Sequence[Holding],
    month_start: datetime,
    month_end: datetime,
) -> Reconciliation:
    """Every pipeline's billed and explained GPU spend in [month_start, month_end)."""
    spans: dict[str, dict[str, list[tuple[datetime, datetime]]]] = {}
    for h in holdings:
        for key in holding_keys(h.resource_id):
            spans.setdefault(key, {}).setdefault(h.pipeline, []).append((h.start, h.end))
    out = Reconciliation()
    for line in lines:
        start, end = max(line.start, month_start), min(line.end, month_end)
        period = hours(line.start, line.end)
        if period <= 0:  # a one-off charge at an instant (a purchase): its month's
            if not month_start <= line.start < month_end:
                continue
            fraction = 1.0
        elif end <= start:
            continue
        else:
            fraction = hours(start, end) / period  # the part of the charge in this month
        cost, gpu_hours = line.cost * fraction, line.gpu_hours * fraction
        users = _users(spans, line.resource_id)
        held = {p: held_hours(start, end, s) for p, s in users.items()}
        shares = split_line(hours(start, end), {p: h for p, h in held.items() if h > 0})
        if not shares:
            # Nobody held it in this period: the pipelines that used it this month paid
            # for the idle hours, in proportion to their use (all unexplained).
            month = {p: held_hours(month_start, month_end, s) for p, s in users.items()}
            used = sum(month.values())
            shares = {p: (h / used, 0.0) for p, h in month.items() if h > 0}
        if not shares and line.pipeline_tag:
            shares = {line.pipeline_tag: (1.0, 0.0)}
        for pipeline, (billed, explained) in shares.items():
            _add(out.pipelines.setdefault(pipeline, Figures()), cost, gpu_hours, billed, explained)
        if not shares:
            _add(out.unattributed, cost, gpu_hours, 1.0, 0.0)
    return out


@dataclass(frozen=True)
class Recorded:
    """A run's own GPU-hours, over its start to finish."""

    pipeline: str
    start: datetime
    end: datetime
    gpu_hours: float


def recorded_gpu_hours(
    runs: Iterable[Recorded], month_start: datetime, month_end: datetime
) -> dict[str, float]:
    """Per pipeline, the GPU-hours its runs recorded within [month_start, month_end): a
    run's hours times the share of its start-to-finish inside the month."""
    out: dict[str, float] = {}
    for r in runs:
        whole = hours(r.start, r.end)
        inside = hours(max(r.start, month_start), min(r.end, month_end))
        share = inside / whole if whole > 0 else float(month_start <= r.start < month_end)
        out[r.pipeline] = out.get(r.pipeline, 0.0) + r.gpu_hours * share
    return out


SLACK = 1.01  # the bill's hours round to the hour or the second; a 1% excess is rounding


def over_explained(
    figures: Mapping[str, Figures], recorded: Mapping[str, float], month: str
) -> list[str]:
    """A warning per pipeline whose explained GPU-hours exceed (by more than SLACK) the
    GPU-hours its runs recorded: a charge stored twice, or a resource its runs named
    that had more GPUs than they used. E.g. 472 explained against 246 recorded."""
    out = []
    for name in sorted(figures):
        explained, own = figures[name].explained_gpu_hours, recorded.get(name, 0.0)
        if explained > own * SLACK and explained > 0.5:
            out.append(
                f"{name}: the bill explains {explained:,.0f} GPU-hours in {month}, more than "
                f"the {own:,.0f} its runs recorded: a charge imported twice, or runs that "
                "used fewer GPUs than the resources they name"
            )
    return out
