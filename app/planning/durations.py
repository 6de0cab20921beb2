"""A duration in words a person reads at a glance: the one formatter of every duration a
page, a note or an answer's working shows (never "4.43e-09 h")."""

from __future__ import annotations

import math


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
