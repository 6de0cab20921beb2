"""Every pipeline's last twelve ISO weeks from the rollups, kept between requests.

The portfolio and the weekly review need, for every pipeline, two weeks' goodput and
badput, the month's recorded spend, and the twelve-week trend summed over all of them.
On 10 million runs the rollup rows of those weeks lie scattered over the table (a week's
20,000 rows on 15,000 pages): reading them costs 0.1-0.2 s per query, every request.

So each process keeps, per pipeline and window, the window's sums, with the pipeline's
*change count* when they were read: the sum of its variants' change counters
(``run_variant.changes``), which every insert or delete of one of its runs increases in
the same transaction (``app.db.rollup``). A request reads the change counts (one small
GROUP BY of ``run_variant``) and reads rollup rows again only for the pipelines whose
change count moved, so what it shows is exactly what a full read would give. Recorded USD
is at the price frozen on each run, so a price change does not touch these sums.

The change counts are read before the rows, so rows can only be newer than the change count
they are filed under; the next request then sees a higher change count and reads again.

Goodput is the production variant's (the baseline, not its experiments and probes):
each entry keeps the production variant's sums beside every variant's (spend, badput)
and the variant it was read under, so a change of production variant reads again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.db import rollup_reads
from app.db.kept import KeptMap
from app.db.run_terms import as_date
from app.planning.rollup import SUMS
from app.planning.weekly import WeekSummary, WeekTotals, summarise, with_goodput_of

WINDOW_WEEKS = 12  # the review's trend; the portfolio's and review's weeks are its last two
COLUMNS = ("runs", *SUMS)
ID_LIST_LIMIT = 1_000  # more pipelines to read again than this: read the whole window


@dataclass(frozen=True)
class PipelineWeeks:
    change_count: int
    sums: np.ndarray  # (WINDOW_WEEKS, len(COLUMNS)): each week, summed over variants
    month_usd: dict[date, float]  # recorded USD per calendar month, in the window
    production: np.ndarray  # the same sums of the production variant's runs: goodput
    production_variant: str | None = None  # the variant ``production`` was read under
    # Week summaries made from ``sums`` when first asked for: a memo of a pure function of
    # the frozen sums (two threads write equal values), the one mutable part of a kept
    # entry, which is replaced, not changed, when the pipeline's runs change.
    summaries: dict[date, WeekSummary] = field(default_factory=dict, compare=False)

    def __getstate__(self) -> dict[str, object]:
        # Written to the database without its memo (made again from the sums): smaller, and
        # never a dict another thread fills while it is written (app.db.kept_snapshot).
        return {**self.__dict__, "summaries": {}}


# Each pipeline's window by (its first Monday, pipeline id) while its change count and
# production variant are as read.
KEPT_WEEKS: KeptMap[tuple[date, int], PipelineWeeks] = KeptMap("org_weeks")
EMPTY = PipelineWeeks(
    0, np.zeros((WINDOW_WEEKS, len(COLUMNS))), {}, np.zeros((WINDOW_WEEKS, len(COLUMNS)))
)


def totals_of(monday: date, row: np.ndarray) -> WeekTotals:
    """A week's WeekTotals from its row of sums."""
    return rollup_reads.totals_from(monday, dict(zip(COLUMNS, row.tolist(), strict=True)))


@dataclass(frozen=True)
class OrgWindow:
    """The WINDOW_WEEKS ISO weeks ending with ``last``'s, for a set of pipelines."""

    last: date
    pipelines: dict[int, PipelineWeeks]
    # Each pipeline's change count its weeks were read under (absent: no runs ever): with
    # ``last``, the key of anything computed from the window (a whole answer kept).
    change_counts: dict[int, int] = field(default_factory=dict)

    @property
    def first(self) -> date:
        return self.last - timedelta(weeks=WINDOW_WEEKS - 1)

    def _index(self, monday: date) -> int:
        index = (monday - self.first).days // 7
        if not 0 <= index < WINDOW_WEEKS:
            raise ValueError(f"week of {monday} is outside the window ending {self.last}")
        return index

    def summary(self, pipeline_id: int, monday: date) -> WeekSummary:
        """The pipeline's week as ``fill_weeks`` gives it (zeros and no goodput when the
        week had no runs)."""
        entry = self.pipelines.get(pipeline_id, EMPTY)
        found = entry.summaries.get(monday)
        if found is None:
            i = self._index(monday)
            found = summarise(totals_of(monday, entry.sums[i]))
            found = with_goodput_of(found, totals_of(monday, entry.production[i]).goodput)
            if entry is not EMPTY:
                entry.summaries[monday] = found
        return found

    def change_count(self, pipeline_id: int) -> int:
        """The pipeline's change count its weeks were read under (0: it has no runs); also
        the key of anything else computed from its runs."""
        return self.pipelines.get(pipeline_id, EMPTY).change_count

    def overall(self, pipeline_id: int, monday: date) -> float | None:
        """Overall goodput of the pipeline's week (None: no runs that week)."""
        return self.summary(pipeline_id, monday).goodput.overall

    def together(self) -> list[WeekSummary]:
        """Every week of the window, all the pipelines summed, oldest first (as
        ``fill_weeks`` gives them: empty weeks have zeros and no goodput)."""
        summed = np.sum([p.sums for p in self.pipelines.values()] or [EMPTY.sums], axis=0)
        prod = np.sum([p.production for p in self.pipelines.values()] or [EMPTY.sums], axis=0)
        out = []
        for i, row in enumerate(summed):
            monday = self.first + timedelta(weeks=i)
            week = summarise(totals_of(monday, row))
            out.append(with_goodput_of(week, totals_of(monday, prod[i]).goodput))
        return out

    def month_usd(self, pipeline_id: int, month: date) -> float:
        """Recorded USD of the pipeline's runs in ``month`` (its 1st) up to the end of the
        window (the whole month so far when the window ends with the current week)."""
        return self.pipelines.get(pipeline_id, EMPTY).month_usd.get(month, 0.0)


def org_window(
    session: Session,
    pipeline_ids: Sequence[int],
    last: date,
    production: Mapping[int, str] | None = None,
) -> OrgWindow:
    """The window ending with ``last``'s week (a Monday) for these pipelines; a pipeline
    that never had runs has empty weeks. ``production``: each pipeline's production
    variant, when the caller has read them (else they are read here)."""
    first = last - timedelta(weeks=WINDOW_WEEKS - 1)
    ids_or_all = None if len(pipeline_ids) > ID_LIST_LIMIT else list(pipeline_ids)
    current = rollup_reads.change_counts(session, ids_or_all)
    if production is None:
        production = rollup_reads.production_variants(session, ids_or_all)
    wanted = [pid for pid in pipeline_ids if pid in current]
    keys = [((first, pid), (current[pid], production.get(pid))) for pid in wanted]

    def read(stale: list[tuple[date, int]]) -> dict[tuple[date, int], PipelineWeeks]:
        ids = None if len(stale) > ID_LIST_LIMIT else [pid for _, pid in stale]
        fresh = _build(
            rollup_reads.window_rows(session, first, last + timedelta(weeks=1), ids), first
        )
        out = {}
        for slot in stale:
            sums, months, prod = fresh.get(slot[1], (EMPTY.sums, {}, EMPTY.production))
            out[slot] = PipelineWeeks(current[slot[1]], sums, months, prod, production.get(slot[1]))
        return out

    found = KEPT_WEEKS.get_many(session, keys, read)
    return OrgWindow(
        last, {pid: w for (_, pid), w in found.items()}, {p: current[p] for p in wanted}
    )


def _build(
    rows: list[dict[str, Any]], first: date
) -> dict[int, tuple[np.ndarray, dict[date, float], np.ndarray]]:
    """Each pipeline's (weekly sums, recorded USD per month, the production variant's
    weekly sums) from the window's rows, in one pass of numpy (5,000 pipelines, 70,000
    rows: ~0.3 s)."""
    if not rows:
        return {}
    pids = np.array([r["pipeline_id"] for r in rows])
    weeks = np.array([(as_date(r["week_start"]) - first).days // 7 for r in rows])
    values = np.array([[float(r[c]) for c in COLUMNS] for r in rows])
    order, slot = np.unique(pids, return_inverse=True)
    sums = np.zeros((len(order), WINDOW_WEEKS, len(COLUMNS)))
    np.add.at(sums, (slot, weeks), values)
    prod = np.zeros_like(sums)
    of_production = np.array([bool(r["production"]) for r in rows])
    np.add.at(prod, (slot[of_production], weeks[of_production]), values[of_production])
    months: dict[int, dict[date, float]] = {int(pid): {} for pid in order}
    cost = COLUMNS.index("cost")
    for r, v in zip(rows, values[:, cost], strict=True):
        spent = months[r["pipeline_id"]]
        month = as_date(r["month_start"])
        spent[month] = spent.get(month, 0.0) + float(v)
    return {int(pid): (sums[i], months[int(pid)], prod[i]) for i, pid in enumerate(order)}
