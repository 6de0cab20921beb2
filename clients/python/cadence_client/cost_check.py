"""The CI cost gate (``cadence check``): is a proposed scenario's monthly cost within the
limits a team set and the pipeline's budget? Pure: the monthly costs and the limits in, a
verdict with reasons out.

The rises compare expected bills (today's, production's at its current cadence, and the
proposal's). The budget is judged by the server's one test, the word every page says:
P(bill > budget) against the risk tolerance (the projection's ``within_budget`` and
``p_over_budget``, ``scenario.risk_tolerance``), never by a single figure. The ceiling
(``--max-monthly-usd``) is held against the bill at risk (``bill_at_risk_usd``: the p90
at a 10% tolerance), and each sentence names the figure it judged.

It lives in the client, not app/planning/, because ``cadence check`` runs from the
client's install alone; it imports nothing, and tests/planning/test_cost_check.py
checks it against hand-worked values like every planning function.
"""

from __future__ import annotations

from dataclasses import dataclass

# app/planning/cost_basis.py, and the bill at risk of app/planning/verdict.py
BASIS_NAMES = {"expected_bill": "expected bill", "p90": "p90 bill", "at_risk": "bill at risk"}


@dataclass(frozen=True)
class BudgetTest:
    """The server's one test for the proposal: fits (P below the tolerance) or not."""

    fits: bool
    p_over_budget: float
    risk_tolerance: float


@dataclass(frozen=True)
class CostLimits:
    """Each limit is optional; a limit left out is not checked."""

    max_increase_pct: float | None = None
    max_increase_usd: float | None = None
    max_monthly_usd: float | None = None
    budget_usd: float | None = None  # the pipeline's monthly budget (judged by default)


@dataclass(frozen=True)
class CostCheck:
    today_usd: float
    proposed_usd: float
    increase_usd: float
    increase_pct: float | None  # None when today's cost is 0 (no ratio to take)
    breaches: tuple[str, ...]  # one sentence per limit exceeded
    basis: str = "expected_bill"  # the figure the ceiling and the budget are judged on
    judged_usd: float = 0.0  # that figure for the proposal

    @property
    def passed(self) -> bool:
        return not self.breaches


def check_cost(
    today_usd: float,
    proposed_usd: float,
    limits: CostLimits,
    *,
    judged_usd: float | None = None,
    basis: str = "expected_bill",
    budget_test: BudgetTest | None = None,
) -> CostCheck:
    """increase = proposed - today (expected bills); increase % = 100 x increase / today.
    The ceiling and the budget are judged on ``judged_usd``, the proposal's figure on
    ``basis`` (default: the expected bill, ``proposed_usd``); with ``budget_test`` (a
    server that says it) the budget is the one test: breached when the proposal does
    not fit, whatever ``judged_usd`` says.

    A limit is breached when the figure is strictly above it (equal passes). A
    percentage limit with today's cost at 0 is breached by any increase (any rise from
    nothing is infinitely many percent).
    """
    judged = proposed_usd if judged_usd is None else judged_usd
    name = BASIS_NAMES.get(basis, "expected bill")
    increase = proposed_usd - today_usd
    pct = 100.0 * increase / today_usd if today_usd > 0 else None
    breaches = []
    if limits.max_increase_pct is not None:
        over = pct > limits.max_increase_pct if pct is not None else increase > 0
        if over:
            shown = f"{pct:+.1f}%" if pct is not None else "from $0"
            breaches.append(
                f"the expected bill rises {shown}, over the {limits.max_increase_pct:g}% limit"
            )
    if limits.max_increase_usd is not None and increase > limits.max_increase_usd:
        breaches.append(
            f"the expected bill rises ${increase:,.2f}, over the "
            f"${limits.max_increase_usd:,.2f} limit"
        )
    if limits.max_monthly_usd is not None and judged > limits.max_monthly_usd:
        breaches.append(
            f"the proposed {name} ${judged:,.2f} a month is over the "
            f"${limits.max_monthly_usd:,.2f} limit"
        )
    if limits.budget_usd is not None and budget_test is not None:
        if not budget_test.fits:
            breaches.append(
                f"the proposed month has a {budget_test.p_over_budget:.0%} chance of going "
                f"over the pipeline's ${limits.budget_usd:,.2f} budget (the risk tolerance "
                f"is {budget_test.risk_tolerance:.0%}; {name} ${judged:,.2f})"
            )
    elif limits.budget_usd is not None and judged > limits.budget_usd:
        breaches.append(
            f"the proposed {name} ${judged:,.2f} a month is over the pipeline's "
            f"${limits.budget_usd:,.2f} budget"
        )
    return CostCheck(today_usd, proposed_usd, increase, pct, tuple(breaches), basis, judged)
