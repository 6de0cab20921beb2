"""The one test behind every budget word (app/planning/budget_status.py) and the bill
it is about (app/planning/verdict.py), against hand-worked values (methodology §5)."""

from __future__ import annotations

import numpy as np
import pytest
from cadence_client.cost_check import BudgetTest, CostLimits, check_cost

from app.planning.budget_status import (
    BudgetStatus,
    StatusThresholds,
    budget_status,
    fits_budget,
)
from app.planning.verdict import bill_at_risk
from tests.fixtures.planning import status_words, typical_month_status


def test_fits_is_p_over_below_the_tolerance() -> None:
    # DOMAIN.md §9's check: $100 w.p. 0.7 or $300 w.p. 0.3, budget $1,200. N = 8:
    # P(B > 1200) = P(K >= 3) = 0.4482 (does not fit at 10%); the typical month at
    # 2/week: P = 0.6854 (likely over). A month of 5 runs at most $1,500 < $1,600: P = 0.
    assert not fits_budget(0.4482)
    assert fits_budget(0.0) and fits_budget(0.0999)
    assert not fits_budget(0.1)  # at the tolerance: at risk ("below" it is the test)
    assert fits_budget(0.25, risk_tolerance=0.3)
    assert typical_month_status(0.4482) is BudgetStatus.AT_RISK
    assert typical_month_status(0.6854) is BudgetStatus.LIKELY_OVER
    assert typical_month_status(0.05) is BudgetStatus.WITHIN
    # a looser tolerance moves "within" and nothing else
    loose = StatusThresholds(likely_over=0.5, at_risk=0.3)
    assert loose.risk_tolerance == 0.3
    assert budget_status(0.0, 0.25, 1000.0, loose) is BudgetStatus.WITHIN
    # spend already above the budget is over, whatever P says
    assert budget_status(1001.0, 0.0, 1000.0) is BudgetStatus.OVER
    assert status_words(BudgetStatus.LIKELY_OVER) == "likely over"


def test_the_bill_at_risk_is_the_one_tests_figure() -> None:
    # Ten months 100, 200, ..., 1000. At 10%: the smallest b with 9 of 10 <= b is 900
    # (P(B > 900) = 1/10, the edge); at 30%: 700 (P(B > 700) = 3/10).
    draws = np.arange(100.0, 1001.0, 100.0)
    assert bill_at_risk(draws, 0.1) == 900.0
    assert bill_at_risk(draws, 0.3) == 700.0
    # the figure and the test agree: a budget at or above b leaves P <= t
    for t in (0.1, 0.2, 0.3, 0.5):
        b = bill_at_risk(draws, t)
        assert float(np.mean(draws > b)) <= t + 1e-12
        assert float(np.mean(draws > b - 1)) > t - 1e-12


def test_cadence_check_judges_the_budget_by_the_servers_test() -> None:
    # The expected bill $1,222 is under the $1,300 budget but P(over) = 31%: the check
    # fails, as the pages say; at 8% it passes although the bill at risk is shown.
    limits = CostLimits(budget_usd=1300.0)
    over = BudgetTest(fits=False, p_over_budget=0.31, risk_tolerance=0.1)
    r = check_cost(1222.0, 1222.0, limits, judged_usd=1419.0, basis="at_risk", budget_test=over)
    assert not r.passed
    assert r.breaches == (
        "the proposed month has a 31% chance of going over the pipeline's $1,300.00 budget "
        "(the risk tolerance is 10%; bill at risk $1,419.00)",
    )
    fits = BudgetTest(fits=True, p_over_budget=0.08, risk_tolerance=0.1)
    r = check_cost(1222.0, 1222.0, limits, judged_usd=1310.0, basis="at_risk", budget_test=fits)
    assert r.passed  # the one test, not $1,310 > $1,300
    with pytest.raises(TypeError):
        BudgetTest(True)  # type: ignore[call-arg]
