"""Fitting quality decay against model age (DOMAIN.md §8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.planning.decay import QualityPoint, fit_decay
from app.planning.model import PlanningError


def test_exact_line_is_recovered_with_zero_error() -> None:
    # q(a) = 0.80 - 0.004 a at ages 0..3 weeks: 0.800, 0.796, 0.792, 0.788.
    fit = fit_decay([QualityPoint(a, 0.80 - 0.004 * a) for a in (0, 1, 2, 3)])
    assert fit.decay.model == "linear"
    assert fit.decay.rate_per_week == pytest.approx(0.004)
    assert fit.parameters[0].value == pytest.approx(0.80)
    assert fit.age_range_weeks == (0.0, 3.0)
    assert fit.max_reliable_age_weeks == pytest.approx(4.5)
    assert fit.rate_interval is not None
    assert fit.rate_interval[0] == pytest.approx(0.004, abs=1e-9)
    assert fit.predict(2.5, 1.0) == pytest.approx(0.79)


def test_standard_error_of_the_slope_by_hand() -> None:
    # Ages 0, 1, 2, 3; values 0.800, 0.797, 0.791, 0.789 (higher is better).
    # Sxx = sum (a - 1.5)^2 = 5; slope = sum (a - 1.5)(y - ybar) / Sxx with ybar = 0.79425:
    # (-1.5)(0.00575) + (-0.5)(0.00275) + (0.5)(-0.00325) + (1.5)(-0.00525) = -0.0195,
    # slope = -0.0039, so b = 0.0039/week. Residuals: y - (0.8001 - 0.0039 a) with
    # intercept ybar + 0.0039 x 1.5 = 0.80010: -0.0001, 0.0008, -0.0013, 0.0006; RSS =
    # 1e-8 + 64e-8 + 169e-8 + 36e-8 = 2.7e-6; s^2 = RSS / 2 = 1.35e-6;
    # se(b) = sqrt(s^2 / Sxx) = sqrt(2.7e-7) = 0.00051962.
    fit = fit_decay(
        [QualityPoint(a, v) for a, v in zip((0, 1, 2, 3), (0.8, 0.797, 0.791, 0.789), strict=True)]
    )
    assert fit.decay.rate_per_week == pytest.approx(0.0039)
    assert fit.parameters[1].standard_error == pytest.approx(0.00051962, rel=1e-4)
    # 95% interval: b +/- t_0.975(2) x se = 0.0039 +/- 4.302653 x 0.00051962.
    assert fit.rate_interval == pytest.approx((0.0039 - 0.0022357, 0.0039 + 0.0022357), abs=1e-6)


def test_lower_is_better_metric_decays_upwards() -> None:
    # Log loss rising 0.01/week is a decay of b = 0.01 in the good direction.
    fit = fit_decay(
        [QualityPoint(a, 0.30 + 0.01 * a) for a in (0, 1, 2, 3)], higher_is_better=False
    )
    assert fit.decay.rate_per_week == pytest.approx(0.01)
    assert fit.parameters[0].value == pytest.approx(0.30)
    assert fit.predict(1.0, -1.0) == pytest.approx(0.31)


def test_saturating_data_chooses_the_exponential() -> None:
    # q = 0.75 + 0.05 exp(-a / 1.5) with small seeded noise, 24 points over 0..8 weeks.
    rng = np.random.default_rng(7)
    ages = np.linspace(0, 8, 24)
    values = 0.75 + 0.05 * np.exp(-ages / 1.5) + rng.normal(0, 0.0005, ages.size)
    fit = fit_decay([QualityPoint(float(a), float(v)) for a, v in zip(ages, values, strict=True)])
    assert fit.decay.model == "exponential"
    assert fit.decay.tau_weeks == pytest.approx(1.5, rel=0.1)
    assert fit.decay.amplitude == pytest.approx(0.05, rel=0.1)
    assert fit.tau_interval is not None and fit.tau_interval[0] < 1.5 < fit.tau_interval[1]
    assert fit.aicc["exponential"] < fit.aicc["linear"] - 2


def test_straight_line_data_keeps_the_simpler_model() -> None:
    rng = np.random.default_rng(3)
    ages = np.linspace(0, 4, 20)
    values = 0.8 - 0.004 * ages + rng.normal(0, 0.001, ages.size)
    fit = fit_decay([QualityPoint(float(a), float(v)) for a, v in zip(ages, values, strict=True)])
    assert fit.decay.model == "linear"
    assert math.isclose(fit.decay.rate_per_week, 0.004, rel_tol=0.25)


def test_too_little_data_is_refused() -> None:
    with pytest.raises(PlanningError, match="at least 3"):
        fit_decay([QualityPoint(0, 0.8), QualityPoint(1, 0.79)])
    with pytest.raises(PlanningError, match="different ages"):
        fit_decay([QualityPoint(1, 0.8), QualityPoint(1, 0.79), QualityPoint(1, 0.78)])
