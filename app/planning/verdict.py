"""The bill a budget verdict is about: the one test's figure (docs/methodology.md §5).

"Fits" means P(bill > budget) is below the risk tolerance t
(:func:`app.planning.budget_status.fits_budget`). The same test, said as a figure, is
"the bill at risk", the (1 - t) quantile of the simulated bills, is within the budget:
at t = 10% it is the p90 bill. An alert whose threshold is a share of the budget
(cost_over_budget, 100 = at budget) compares this figure, so its word is the test's.
"""

from __future__ import annotations

import numpy as np


def bill_at_risk(draws: np.ndarray, risk_tolerance: float) -> float:
    """The smallest simulated bill b with at least (1 - t) of the draws <= b (numpy's
    ``inverted_cdf``, as the p10/p50/p90 are): P(B > b) <= t, so a budget at or above b
    fits and one below it does not (up to draws equal to b).

    Check: draws 100, 200, ..., 1000 (ten months). t = 0.1: b = 900 (nine of ten <= 900,
    one above: P(B > 900) = 0.1, the edge); t = 0.3: b = 700."""
    return float(np.percentile(draws, 100.0 * (1.0 - risk_tolerance), method="inverted_cdf"))
