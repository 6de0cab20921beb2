"""This month so far: spend to date plus the rest of the month (docs/methodology.md §5.4).

The end-of-month bill = spend to date (every finished attempt of every variant started
this UTC month, experiments and scaling probes included, at the price frozen on each) +
the attempts still running (each a whole typical retraining, never less than it has cost
so far: :mod:`app.planning.running`) + the bill of the retrainings still to start before
the month ends (a :class:`~app.planning.bill.BillForecast` over
:func:`~app.planning.schedule.remaining_runs`) + the experiments still running at their
pace. Spend to date includes what the running attempts have cost so far. The status word is one of
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
from app.planning.running import RunningNow


@dataclass(frozen=True)
class MonthToDate:
    """The month so far and where it is heading.

    ``experiments_usd`` is the part of ``spend_to_date_usd`` spent by variants other than
    the production one (A/B candidates, scaling probes), ``experiments_share`` its share
    of the spend (0 when nothing was spent). ``status`` and ``p_over_budget`` are None
    for an unbudgeted pipeline: its bill is totalled apart, never against a budget.
    ``running_so_far_usd`` (in the spend to date) is what the attempts still running
    have cost so far, ``running_expected_usd`` what they count in the month's end;
    ``experiments_expected_usd`` is the rest of the month of the experiments still
    running (in the expected end and P(over)); ``warnings`` say in words what to check.
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
    running_attempts: int = 0
    running_so_far_usd: float = 0.0
    running_expected_usd: float = 0.0
    experiments_expected_usd: float = 0.0
    warnings: tuple[str, ...] = ()


# Over 60 lines because the answer has nineteen fields, each named where it is set.
def month_to_date(
    spend_by_variant: Mapping[str, float],
    production_variant: str,
    remaining: BillForecast,
    budget_usd: float | None,
    thresholds: StatusThresholds | None = None,
    *,
    running: RunningNow | None = None,
    experiments_expected_usd: float = 0.0,
) -> MonthToDate:
    """End-of-month bill = finished spend + what the running attempts count + the
    experiments' rest of the month + the remaining retrainings' bill (its draws shifted
    by the rest). Spend to date = finished spend + the running attempts' cost so far.

    Check (the review's month): baseline $1,147, candidate $598, probe $283 on a $1,400
    budget: spend $2,028, experiments $881 (43.4%), status ``over`` whatever is left.
    The Nov 16 month of issue 34 is worked in tests/planning/test_running.py.
    """
    _check(spend_by_variant, budget_usd, experiments_expected_usd)
    now = running or RunningNow()
    finished = math.fsum(spend_by_variant.values())
    spend = finished + now.so_far_usd
    production = float(spend_by_variant.get(production_variant, 0.0)) + now.production_so_far_usd
    experiments = spend - production
    share = experiments / spend if spend > 0 else 0.0
    known = finished + now.counted_usd + experiments_expected_usd
    end = known + np.asarray(remaining.draws)
    lo, mid, hi = bill_quantiles(end)
    expected = known + remaining.expected_bill_usd
    p_over = p_exceeds(end, budget_usd)
    status = None
    if budget_usd is not None and p_over is not None:
        status = budget_status(spend, p_over, budget_usd, thresholds)
    working = [
        *_spent_words(spend, production, experiments, now, experiments_expected_usd),
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
        running_attempts=now.count,
        running_so_far_usd=now.so_far_usd,
        running_expected_usd=now.counted_usd,
        experiments_expected_usd=experiments_expected_usd,
        warnings=now.warnings,
    )


def _check(
    spend_by_variant: Mapping[str, float], budget_usd: float | None, experiments_usd: float
) -> None:
    if not all(math.isfinite(v) and v >= 0 for v in spend_by_variant.values()):
        raise PlanningError("spend to date must be finite and >= 0 for every variant")
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        raise PlanningError("budget must be >= 0")
    if not (math.isfinite(experiments_usd) and experiments_usd >= 0):
        raise PlanningError("the experiments' expected rest must be finite and >= 0")


def _spent_words(
    spend: float, production: float, experiments: float, now: RunningNow, rest: float
) -> list[str]:
    """The spend so far, what runs now, and the experiments' rest, in words."""
    share = experiments / spend if spend > 0 else 0.0
    words = [
        f"Spent so far this month: ${spend:,.2f} (production ${production:,.2f}, "
        f"experiments and probes ${experiments:,.2f}, {share:.1%})."
    ]
    if now.count:
        words.append(
            f"Still running: {now.count} attempt{'s' if now.count != 1 else ''}, "
            f"${now.so_far_usd:,.2f} so far (in the spend), counted "
            f"${now.counted_usd:,.2f} by the month's end."
        )
    if rest > 0:
        words.append(
            f"Experiments still running, at their pace of the last 14 days: "
            f"${rest:,.2f} more by the month's end."
        )
    return words
