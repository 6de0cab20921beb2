"""The CI cost gate (``cadence check``): is a proposed scenario's monthly cost within the
limits a team set and the pipeline's budget? Pure: the monthly costs and the limits in, a
verdict with reasons out.

The rises compare expected bills (today's and the proposal's). The ceiling and the
budget are judged on the pipeline's cost basis, the figure the server's decision card,
gate and alerts read (``scenario.cost_basis`` of the projection: the p90 bill or the
expected bill), and each sentence names it.

It lives in the client, not app/planning/, because ``cadence check`` runs from the
client's install alone; it imports nothing, and tests/planning/test_cost_check.py
checks it against hand-worked values like every planning function.
"""

from __future__ import annotations

from dataclasses import dataclass

BASIS_NAMES = {"expected_bill": "expected bill", "p90": "p90 bill"}  # app/planning/cost_basis.py


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
) -> CostCheck:
    """increase = proposed - today (expected bills); increase % = 100 x increase / today.
    The ceiling and the budget are judged on ``judged_usd``, the proposal's figure on
    ``basis`` (default: the expected bill, ``proposed_usd``).

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
    if limits.budget_usd is not None and judged > limits.budget_usd:
        breaches.append(
            f"the proposed {name} ${judged:,.2f} a month is over the pipeline's "
            f"${limits.budget_usd:,.2f} budget"
        )
    return CostCheck(today_usd, proposed_usd, increase, pct, tuple(breaches), basis, judged)
