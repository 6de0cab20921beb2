"""The portfolio's totals and sort orders (pure)."""

from __future__ import annotations

import pytest

from app.planning.budget_status import BudgetStatus
from app.planning.portfolio import PortfolioRow, portfolio_totals, sort_rows


def row(
    name: str,
    cost: float | None,
    budget: float | None,
    mtd: float,
    change: float | None,
    status: BudgetStatus | None = None,
) -> PortfolioRow:
    return PortfolioRow(name, "team", cost, budget, mtd, change, status)


ROWS = [
    # expected bill $91 under the budget, but P(over) at or above the tolerance: at risk
    row("a", 1309.0, 1400.0, 500.0, -2.0, BudgetStatus.AT_RISK),
    row("b", 1900.0, 1400.0, 800.0, 3.0, BudgetStatus.LIKELY_OVER),  # expected $500 above
    row("c", None, 100.0, 0.0, None, BudgetStatus.WITHIN),  # no production runs
    row("d", 300.0, None, 120.0, -8.5),  # no budget
    row("e", 260.0, 200.0, 90.0, 0.0, BudgetStatus.WITHIN),  # $60 above, yet P(over) < 10%
]


def test_totals() -> None:
    t = portfolio_totals(ROWS)
    assert t.pipelines == 5
    assert t.monthly_spend_usd == 1309 + 1900 + 300 + 260  # 3,769; "c" has no projection
    # the budgets compared: those of pipelines with an expected bill ("c" has none to
    # compare, "d" no budget): 1400 + 1400 + 200 = 3,000, against budgeted 3,469
    assert t.budget_usd == 1400 + 1400 + 200
    assert t.month_to_date_usd == 1510.0
    # over = does not fit by the one test (a at risk, b likely over), whatever the
    # expected bill says; the amount is what lies above the budgets: a 0 + b 500
    assert (t.over_budget, t.over_budget_usd) == (2, 500.0)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("name", ["a", "b", "c", "d", "e"]),
        ("spend", ["b", "a", "d", "e", "c"]),
        ("over_budget", ["b", "e", "a", "c", "d"]),  # a: -91; c and d have no figure
        ("goodput_change", ["d", "a", "e", "b", "c"]),  # the largest drop first
    ],
)
def test_sort(key: str, expected: list[str]) -> None:
    assert [r.name for r in sort_rows(ROWS, key)] == expected


def test_unknown_sort() -> None:
    with pytest.raises(ValueError, match="sort must be one of"):
        sort_rows(ROWS, "colour")


def test_unbudgeted_apart_and_status_counts() -> None:
    # The module's check: $1,000 against $800 (over) and $300 unbudgeted: spend $1,300 =
    # budgeted $1,000 + unbudgeted $300; statuses counted per word, every word present.
    rows = [
        PortfolioRow("x", "team", 1000.0, 800.0, 900.0, None, BudgetStatus.OVER),
        PortfolioRow("y", "team", 300.0, None, 100.0, None),
    ]
    t = portfolio_totals(rows)
    assert (t.monthly_spend_usd, t.budgeted_monthly_usd, t.unbudgeted_monthly_usd) == (
        1300.0,
        1000.0,
        300.0,
    )
    assert t.statuses == {"over": 1, "likely_over": 0, "at_risk": 0, "within": 0}
    assert (t.over_budget, t.over_budget_usd) == (1, 200.0)
    # ROWS above: budgeted a + b + c + e = 1309 + 1900 + 0 + 260; unbudgeted d = 300.
    # (x is over by the one test: spent more than its budget already.)
    t = portfolio_totals(ROWS)
    assert (t.budgeted_monthly_usd, t.unbudgeted_monthly_usd) == (3469.0, 300.0)
