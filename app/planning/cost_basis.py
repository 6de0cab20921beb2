"""The cost basis: which figure of the month's bill a budget sentence shows.

A pipeline's ``gate_cost_basis`` setting picks it, and the gate's cost criterion and the
API's ``scenario.cost_basis`` name it beside the chance of going over. It decides
nothing: every verdict ("fits", "within", "over") is the one test of
:func:`app.planning.budget_status.fits_budget`, P(bill > budget) against the risk
tolerance (docs/methodology.md §5.7).

- ``expected_bill``: E[B], runs in the month x the mean retraining cost;
- ``p90``: the bill's p90, which 9 months in 10 stay under (the default).

``expected_bill`` was stored as ``median`` until migration 0020 (the figure had become
the expected bill when the bill replaced the median month); the API refuses the old
word with a 422 that names the new one (:data:`RENAMED`).
"""

from __future__ import annotations

from typing import Literal

CostBasis = Literal["expected_bill", "p90"]
COST_BASES: tuple[CostBasis, ...] = ("expected_bill", "p90")
DEFAULT_COST_BASIS: CostBasis = "p90"

BASIS_NAMES: dict[str, str] = {"expected_bill": "expected bill", "p90": "p90 bill"}
"""The figure in words, as a sentence names it: "the p90 bill $1,403 is over ..."."""

RENAMED = (
    "'median' is now called 'expected_bill' (the same figure: the expected bill); "
    "send expected_bill or p90"
)


def basis_figure(basis: str, expected_bill_usd: float, bill_p90_usd: float) -> float:
    """The figure ``basis`` names (anything but ``p90`` is the expected bill)."""
    return bill_p90_usd if basis == "p90" else expected_bill_usd
