"""How fast a model goes stale: quality against model age (methodology.md §11).

Evaluations report the serving model's quality at age ``a`` (weeks since its training run
finished). Two models are fitted by least squares:

- linear ``q(a) = q0 - b a`` (b: quality lost per week);
- saturating exponential ``q(a) = q_inf + (q0 - q_inf) exp(-a / tau)`` (quality falls
  towards a floor ``q_inf`` with time constant ``tau`` weeks).

The exponential is chosen only when there are at least ``MIN_EXPONENTIAL_POINTS`` points
and its small-sample Akaike criterion (AICc; Hurvich & Tsai 1989) beats the linear one's
by more than 2 (a real improvement, not one extra parameter chasing noise). Parameters
come with standard errors from the fit's covariance and (1 - alpha) t intervals.

"Loss" is in the metric's good direction: for a lower-is-better metric (log loss) a
rising value is a loss. Pure: numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import curve_fit
from scipy.stats import t as student_t

from app.planning.model import PlanningError

MIN_POINTS = 3
MIN_EXPONENTIAL_POINTS = 6
AIC_MARGIN = 2.0
EXTRAPOLATION_FACTOR = 1.5
"""Ages up to 1.5 x the oldest evaluated age are shown as mild extrapolation; beyond it a
cadence's staleness is flagged as far outside the data."""
DecayModel = Literal["linear", "exponential"]


@dataclass(frozen=True)
class QualityPoint:
    age_weeks: float
    value: float


@dataclass(frozen=True)
class Decay:
    """A decay curve in the good direction: ``loss(a)`` = quality lost at age a (>= 0 for
    a model that goes stale). Linear: loss = b a. Exponential: loss = A (1 - exp(-a/tau))
    with A = sign (q0 - q_inf) the total loss towards the floor."""

    model: DecayModel
    rate_per_week: float  # b for linear; the initial slope A / tau for exponential
    amplitude: float | None = None
    tau_weeks: float | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.rate_per_week):
            raise PlanningError("decay rate must be finite")
        if self.model == "exponential" and not (
            self.amplitude is not None
            and self.tau_weeks is not None
            and math.isfinite(self.amplitude)
            and math.isfinite(self.tau_weeks)
            and self.tau_weeks > 0
        ):
            raise PlanningError("an exponential decay needs a finite amplitude and tau > 0")

    def loss(self, age_weeks: float) -> float:
        if self.model == "linear":
            return self.rate_per_week * age_weeks
        assert self.amplitude is not None and self.tau_weeks is not None
        return self.amplitude * -math.expm1(-age_weeks / self.tau_weeks)

    def mean_loss(self, interval_weeks: float, delay_weeks: float = 0.0) -> float:
        """Mean loss over a model's life from age d to d + I (retrained every I weeks).

        Linear: b (d + I/2), so b / (2k) at k runs/week and no delay. Exponential:
        A (1 - (tau / I)(exp(-d/tau) - exp(-(d+I)/tau))), the average of the loss curve.
        """
        if interval_weeks <= 0:
            raise PlanningError("the retraining interval must be > 0")
        if self.model == "linear":
            return self.rate_per_week * (delay_weeks + interval_weeks / 2.0)
        assert self.amplitude is not None and self.tau_weeks is not None
        tau = self.tau_weeks
        area = tau * (
            math.exp(-delay_weeks / tau) - math.exp(-(delay_weeks + interval_weeks) / tau)
        )
        return self.amplitude * (1.0 - area / interval_weeks)


@dataclass(frozen=True)
class Parameter:
    name: str
    value: float
    standard_error: float | None
    interval: tuple[float, float] | None


@dataclass(frozen=True)
class DecayFit:
    """The chosen fit. ``age_range_weeks`` is the observed range of ages; the fit says
    nothing reliable far beyond it (see ``EXTRAPOLATION_FACTOR``)."""

    decay: Decay
    points: int
    age_range_weeks: tuple[float, float]
    parameters: tuple[Parameter, ...]
    rate_interval: tuple[float, float] | None
    tau_interval: tuple[float, float] | None
    residual_sd: float
    # None where AICc is undefined: as many parameters as the points allow (the line
    # through 3 evaluations). inf in the arithmetic, but JSON has no inf (it went out as
    # null against a schema of numbers).
    aicc: dict[str, float | None]
    confidence: float
    notes: tuple[str, ...]

    @property
    def max_reliable_age_weeks(self) -> float:
        return self.age_range_weeks[1] * EXTRAPOLATION_FACTOR

    def predict(self, age_weeks: float, sign: float) -> float:
        """The fitted metric value at an age (sign +1 if higher is better, else -1)."""
        q0 = self.parameters[0].value
        return q0 - sign * self.decay.loss(age_weeks)


def _defined(scores: dict[str, float]) -> dict[str, float | None]:
    return {name: value if math.isfinite(value) else None for name, value in scores.items()}


def _aicc(rss: float, n: int, k: int) -> float:
    """AICc with k fitted parameters plus the noise variance: n ln(RSS/n) + 2p + 2p(p+1)/(n-p-1)."""
    p = k + 1
    rss = max(rss, 1e-300)
    return (
        n * math.log(rss / n)
        + 2 * p
        + (2 * p * (p + 1) / (n - p - 1) if n - p - 1 > 0 else math.inf)
    )


def fit_decay(
    points: Sequence[QualityPoint], *, higher_is_better: bool = True, confidence: float = 0.95
) -> DecayFit:
    """Fit linear and exponential decay to (age, value) points; keep the better one.

    Needs at least 3 points at two or more distinct ages. Values are sign-adjusted
    (s = +1 if higher is better, else -1) so that the rate b > 0 means the model gets
    worse with age; b <= 0 (no measurable decay) is reported as such.
    """
    if len(points) < MIN_POINTS:
        raise PlanningError(f"a decay fit needs at least {MIN_POINTS} evaluations")
    ages = np.array([p.age_weeks for p in points], dtype=float)
    sign = 1.0 if higher_is_better else -1.0
    values = sign * np.array([p.value for p in points], dtype=float)
    if not (np.all(np.isfinite(ages)) and np.all(np.isfinite(values))) or np.any(ages < 0):
        raise PlanningError("ages must be finite and >= 0 and values finite")
    if np.ptp(ages) <= 0:
        raise PlanningError("a decay fit needs evaluations at two or more different ages")
    n = len(points)
    tq = float(student_t.ppf(0.5 + confidence / 2.0, max(1, n - 2)))
    # Linear: values = q0 - b a (sign-adjusted), ordinary least squares.
    design = np.column_stack([np.ones(n), -ages])
    coef, *_ = np.linalg.lstsq(design, values, rcond=None)
    resid = values - design @ coef
    rss_lin = float(resid @ resid)
    sigma2 = rss_lin / (n - 2) if n > 2 else 0.0
    cov = sigma2 * np.linalg.inv(design.T @ design)
    q0, b = float(coef[0]), float(coef[1])
    se_q0, se_b = float(math.sqrt(cov[0, 0])), float(math.sqrt(cov[1, 1]))
    aicc = {"linear": _aicc(rss_lin, n, 2)}
    linear = DecayFit(
        decay=Decay("linear", b),
        points=n,
        age_range_weeks=(float(ages.min()), float(ages.max())),
        parameters=(
            Parameter("q0", sign * q0, se_q0, _interval(sign * q0, se_q0, tq)),
            Parameter("rate_per_week", b, se_b, _interval(b, se_b, tq)),
        ),
        rate_interval=_interval(b, se_b, tq),
        tau_interval=None,
        residual_sd=math.sqrt(sigma2),
        aicc=_defined(aicc),
        confidence=confidence,
        notes=_linear_notes(b, se_b, tq, n),
    )
    if n < MIN_EXPONENTIAL_POINTS:
        return linear
    exp_fit = _fit_exponential(ages, values, q0, b, sign, confidence, aicc)
    if exp_fit is None:
        return linear
    exp_score = exp_fit.aicc["exponential"]  # None: undefined, no better than the line
    if exp_score is None or exp_score >= aicc["linear"] - AIC_MARGIN:
        return linear
    return exp_fit


def _interval(value: float, se: float, tq: float) -> tuple[float, float]:
    return value - tq * se, value + tq * se


def _linear_notes(b: float, se: float, tq: float, n: int) -> tuple[str, ...]:
    notes = [f"Linear fit on {n} evaluations."]
    if b <= 0:
        notes.append("No decay measured: quality does not fall with age in these evaluations.")
    elif b - tq * se <= 0:
        notes.append("The decay rate's interval includes zero: the evidence of decay is weak.")
    return tuple(notes)


def _fit_exponential(
    ages: np.ndarray,
    values: np.ndarray,
    q0: float,
    b: float,
    sign: float,
    confidence: float,
    aicc: dict[str, float],
) -> DecayFit | None:
    """Nonlinear least squares for q_inf + (q0 - q_inf) exp(-a / tau); None if it fails."""
    n = len(ages)
    span = float(ages.max())

    def curve(a: np.ndarray, q0_: float, q_inf: float, tau: float) -> np.ndarray:
        return q_inf + (q0_ - q_inf) * np.exp(-a / tau)

    start_drop = max(abs(b) * span, 1e-9)
    try:
        params, cov = curve_fit(
            curve,
            ages,
            values,
            p0=(q0, q0 - start_drop, max(span / 2.0, 1e-3)),
            bounds=([-np.inf, -np.inf, span * 1e-3], [np.inf, np.inf, span * 100.0]),
            maxfev=5000,
        )
    except (RuntimeError, ValueError):
        return None
    if not np.all(np.isfinite(cov)):
        return None
    q0_, q_inf, tau = (float(x) for x in params)
    resid = values - curve(ages, q0_, q_inf, tau)
    rss = float(resid @ resid)
    ses = [float(math.sqrt(max(v, 0.0))) for v in np.diag(cov)]
    tq = float(student_t.ppf(0.5 + confidence / 2.0, n - 3))
    amplitude = q0_ - q_inf
    tau_lo = max(tau - tq * ses[2], 1e-9)
    scores = {**aicc, "exponential": _aicc(rss, n, 3)}
    return DecayFit(
        decay=Decay("exponential", amplitude / tau, amplitude=amplitude, tau_weeks=tau),
        points=n,
        age_range_weeks=(float(ages.min()), span),
        parameters=(
            Parameter("q0", sign * q0_, ses[0], _interval(sign * q0_, ses[0], tq)),
            Parameter("q_inf", sign * q_inf, ses[1], _interval(sign * q_inf, ses[1], tq)),
            Parameter("tau_weeks", tau, ses[2], (tau_lo, tau + tq * ses[2])),
        ),
        rate_interval=None,
        tau_interval=(tau_lo, tau + tq * ses[2]),
        residual_sd=math.sqrt(rss / (n - 3)),
        aicc=_defined(scores),
        confidence=confidence,
        notes=(
            f"Saturating exponential on {n} evaluations: AICc {scores['exponential']:.1f} "
            f"against {scores['linear']:.1f} for a straight line.",
        ),
    )
