"""A duration in words a person reads at a glance: the one formatter of every duration a
page, a note or an answer's working shows (never "4.43e-09 h")."""

from __future__ import annotations

import math
from collections.abc import Iterable


def duration(hours: float | None) -> str:
    """``hours`` in the unit that fits: seconds under a minute, minutes under an hour,
    hours under two days, then days. Examples: 0 -> "0 s"; 4.43e-09 (16 us) -> "under
    1 s"; 0.01 -> "36 s"; 0.0833 -> "5 min"; 0.04 -> "2.4 min"; 1.95 -> "1.95 h" (117
    min reads better as hours here); 14 -> "14 h"; 100 -> "4.2 days"; inf -> "never";
    None -> "–"."""
    if hours is None or math.isnan(hours):
        return "–"
    if math.isinf(hours):
        return "never"
    if hours < 0:
        return "-" + duration(-hours)
    seconds = hours * 3600.0
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return "under 1 s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        minutes = seconds / 60
        return (
            f"{minutes:.1f} min".replace(".0 min", " min") if minutes < 10 else f"{minutes:.0f} min"
        )
    if hours < 48:
        return f"{hours:.3g} h"
    return f"{hours / 24:.2g} days" if hours < 240 else f"{hours / 24:,.0f} days"


HOURS_PER_WEEK = 168.0


def week_capacity_warning(runs_per_week: float, wall_clock_hours: float) -> str | None:
    """Why a cadence cannot be run, when its runs need more wall clock than a week holds
    (one after another), else None. Example: 40 runs of 14 h need 560 h > 168 h:
    "40 runs a week of 14 h each need 560 h, more than the 168 h a week has: impossible
    unless runs overlap"; 2 runs of 14 h (28 h) -> None."""
    need = runs_per_week * wall_clock_hours
    if need <= HOURS_PER_WEEK * (1 + 1e-9):
        return None
    return (
        f"{runs_per_week:g} runs a week of {duration(wall_clock_hours)} each need "
        f"{duration(need) if need < 48 else f'{need:,.0f} h'}, more than the 168 h a week "
        "has: impossible unless runs overlap"
    )


def week_capacity_warnings(cadences: Iterable[float], wall_clock_hours: float) -> list[str]:
    """:func:`week_capacity_warning` of each cadence that a week cannot hold."""
    return [w for k in cadences if (w := week_capacity_warning(k, wall_clock_hours))]
