"""The exact bill distribution when the retraining cost distribution is known.

No window, no resampling: B = the sum of N independent costs drawn from a known
discrete distribution, with N from a :class:`~app.planning.schedule.RunsInMonth`. Used
for the worked checks of docs/methodology.md §5.3 and as the reference
the Monte Carlo forecast is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.planning.model import PlanningError
from app.planning.schedule import RunsInMonth


@dataclass(frozen=True)
class ExactBill:
    """B as atoms: ``bills[i]`` (ascending) with probability ``probabilities[i]``."""

    bills: tuple[float, ...]
    probabilities: tuple[float, ...]

    @property
    def mean(self) -> float:
        return math.fsum(b * p for b, p in zip(self.bills, self.probabilities, strict=True))

    def p_over(self, budget_usd: float) -> float:
        """P(B > budget), strictly above."""
        return math.fsum(
            p for b, p in zip(self.bills, self.probabilities, strict=True) if b > budget_usd
        )

    def quantile(self, q: float) -> float:
        """The smallest bill b with P(B <= b) >= q (the same definition as the forecast)."""
        if not 0 < q <= 1:
            raise PlanningError("quantile must be in (0, 1]")
        total = 0.0
        for bill, p in zip(self.bills, self.probabilities, strict=True):
            total += p
            if total >= q - 1e-12:
                return bill
        return self.bills[-1]


def _sum_of(n: int, costs: Sequence[float], probs: Sequence[float]) -> dict[float, float]:
    """Distribution of the sum of n costs, by repeated convolution (rounded to the cent
    so equal sums reached in different orders share one atom)."""
    dist: dict[float, float] = {0.0: 1.0}
    for _ in range(n):
        step: dict[float, float] = {}
        for total, p in dist.items():
            for cost, q in zip(costs, probs, strict=True):
                key = round(total + cost, 2)
                step[key] = step.get(key, 0.0) + p * q
        dist = step
    return dist


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def exact_bill(
    costs: Sequence[float], probabilities: Sequence[float], runs: RunsInMonth
) -> ExactBill:
    """The exact distribution of the month's bill.

    Check: costs $100 (p 0.7) / $300 (p 0.3), N = 9: B = 900 + 200K with
    K ~ Binomial(9, 0.3), E[B] = 9 x 160 = $1,440, P(B > 1200) = P(K >= 2) = 0.8040.
    """
    if not costs or len(costs) != len(probabilities):
        raise PlanningError("give one probability per cost")
    if not math.isclose(math.fsum(probabilities), 1.0, abs_tol=1e-9):
        raise PlanningError("cost probabilities must sum to 1")
    mixture: dict[float, float] = {}
    for n, weight in zip(runs.counts, runs.probabilities, strict=True):
        for bill, p in _sum_of(n, costs, probabilities).items():
            mixture[bill] = mixture.get(bill, 0.0) + weight * p
    bills = tuple(sorted(mixture))
    return ExactBill(bills, tuple(mixture[b] for b in bills))
