"""A run's utilization readings, one per source that gave it, from the run as stored and
its measurement audit; and the sentence when two sources disagree. Pure.

A run is ingested with a utilization (or none) and its source; ``cadence enrich
prometheus --overwrite`` (or a measurements PATCH) may replace it, and the audit keeps
the old value and source, the new ones, and the coverage and note sent with them (one
time for all the rows of one request). Walking the audit from the oldest row gives each
reading in turn; the first is the run as ingested.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

DISAGREE = 0.15  # two sources further apart than this measure differently, or wrongly
VALUE, SOURCE = "gpu_utilization", "utilization_source"
COVERAGE, NOTE = "utilization_coverage", "utilization_note"


@dataclass(frozen=True)
class Change:
    """One audit row: the field, its old and new value as text, when and by whom."""

    field: str
    old: str | None
    new: str | None
    at: datetime
    by: str


@dataclass(frozen=True)
class Reading:
    value: float
    source: str | None
    coverage: float | None = None  # share of the wall clock its series cover; None: unknown
    note: str = ""
    at: datetime | None = None  # None: as ingested
    by: str = ""


def readings(value: float | None, source: str | None, changes: list[Change]) -> list[Reading]:
    """Every utilization the run has had, oldest first. Worked: ingested at 0.41 from
    nvml_gpu_util, enriched to 0.85 from dcgm_gr_engine_active with coverage 0.5 ->
    [0.41 nvml_gpu_util (as ingested), 0.85 dcgm_gr_engine_active, coverage 0.5]."""
    first_value = next((c for c in changes if c.field == VALUE), None)
    first_source = next((c for c in changes if c.field == SOURCE), None)
    now = _parse(first_value.old) if first_value else value
    source = first_source.old if first_source else source
    out = [] if now is None else [Reading(now, source)]
    for (at, by), group in groupby(changes, key=lambda c: (c.at, c.by)):
        rows = {c.field: c.new for c in group}
        if VALUE not in rows and SOURCE not in rows:
            continue  # MFU, stall or checkpoint hours: not a utilization reading
        now = _parse(rows[VALUE]) if VALUE in rows else now
        source = rows.get(SOURCE, source)
        if now is not None:
            coverage = _parse(rows.get(COVERAGE))
            out.append(Reading(now, source, coverage, rows.get(NOTE) or "", at, by))
    return out


def disagreement(found: list[Reading]) -> str | None:
    """A sentence when the latest readings of two sources differ by more than
    ``DISAGREE``. Worked: nvml_gpu_util 0.41 and dcgm_gr_engine_active 0.85 are 0.44
    apart: said; 0.41 and 0.50 (0.09 apart) are not."""
    latest = {r.source: r for r in found}  # the newest reading of each source
    if len(latest) < 2:
        return None
    low = min(latest.values(), key=lambda r: r.value)
    high = max(latest.values(), key=lambda r: r.value)
    gap = high.value - low.value
    if gap <= DISAGREE:
        return None
    return (
        f"Two sources disagree: {high.source or 'an unnamed source'} read {high.value:.2f} "
        f"and {low.source or 'an unnamed source'} {low.value:.2f}, {gap:.2f} apart (more "
        f"than {DISAGREE:.2f}). They may measure different things (docs/sources.md), or the "
        "series matched were not this run's GPUs."
    )


def _parse(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
