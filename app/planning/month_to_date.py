"""This month so far: spend to date plus the rest of the month (docs/methodology.md §5.4).

The end-of-month bill = spend to date (every attempt of every variant started this UTC
month, experiments and scaling probes included, at the price frozen on each) + the bill
of the retrainings still to start before the month ends (a
:class:`~app.planning.bill.BillForecast` over
:func:`~app.planning.schedule.remaining_runs`). The status word is one of
:class:`BudgetStatus`, the same on every page and endpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.planning.bill import BillForecast, bill_quantiles, p_exceeds
from app.planning.budget_status import BudgetStatus, StatusThresholds, budget_status
from app.planning.model import PlanningError


@dataclass(frozen=True)
class MonthToDate:
    """The month so far and where it is heading.

    ``experiments_usd`` is the part of ``spend_to_date_usd`` spent by variants other than
    the production one (A/B candidates, scaling probes), ``experiments_share`` its share
    of the spend (0 when nothing was spent). ``status`` and ``p_over_budget`` are None
    for an unbudgeted pipeline: its bill is totalled apart, never against a budget.
    """

    spend_to_date_usd: float
    production_usd: float
    experiments_usd: float
    experiments_share: float
    remaining_runs: float
    expected_remaining_usd: float
    expected_end_of_month_usd: float
    end_of_month_p10_usd: float
    end_of_month_p50_usd: float
    end_of_month_p90_usd: float
    budget_usd: float | None
    p_over_budget: float | None
    status: BudgetStatus | None
    working: tuple[str, ...]


def month_to_date(
    spend_by_variant: Mapping[str, float],
    production_variant: str,
    remaining: BillForecast,
    budget_usd: float | None,
    thresholds: StatusThresholds | None = None,
) -> MonthToDate:
    """End-of-month bill = spend to date + the remaining retrainings' bill (its draws
    shifted by the spend). Expected end of month = spend + remaining expected bill.

    Check (the review's month): baseline $1,147, candidate $598, probe $283 on a $1,400
    budget: spend $2,028, experiments $881 (43.4%), status ``over`` whatever is left.
    """
    values = list(spend_by_variant.values())
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise PlanningError("spend to date must be finite and >= 0 for every variant")
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        raise PlanningError("budget must be >= 0")
    spend = math.fsum(values)
    production = float(spend_by_variant.get(production_variant, 0.0))
    experiments = spend - production
    share = experiments / spend if spend > 0 else 0.0
    end = spend + np.asarray(remaining.draws)
    lo, mid, hi = bill_quantiles(end)
    expected = spend + remaining.expected_bill_usd
    p_over = p_exceeds(end, budget_usd)
    status = None
    if budget_usd is not None and p_over is not None:
        status = budget_status(spend, p_over, budget_usd, thresholds)
    working = [
        f"Spent so far this month: ${spend:,.2f} (production ${production:,.2f}, "
        f"experiments and probes ${experiments:,.2f}, {share:.1%}).",
        f"Still to start: {remaining.runs.describe()}, expected "
        f"${remaining.expected_bill_usd:,.2f}.",
        f"Expected end of month ${expected:,.2f} (p10 ${lo:,.0f}, p90 ${hi:,.0f}).",
    ]
    if budget_usd is not None and status is not None and p_over is not None:
        working.append(f"Budget ${budget_usd:,.0f}: P(over) = {p_over:.1%}, status {status.value}.")
    return MonthToDate(
        spend_to_date_usd=spend,
        production_usd=production,
        experiments_usd=experiments,
        experiments_share=share,
        remaining_runs=remaining.runs_in_month,
        expected_remaining_usd=remaining.expected_bill_usd,
        expected_end_of_month_usd=expected,
        end_of_month_p10_usd=lo,
        end_of_month_p50_usd=mid,
        end_of_month_p90_usd=hi,
        budget_usd=budget_usd,
        p_over_budget=p_over,
        status=status,
        working=tuple(working),
    )
