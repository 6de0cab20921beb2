"""The A/B gate in words a manager reads: a verdict with its reason first, each criterion's
result in dollars and percentage points against its threshold, and the runs still needed
as weeks at today's cadence and dollars (methodology.md §7).

The statistics (bounds, p-values, degrees of freedom) stay in the gate result; this module
only says what they mean. Every figure comes from the :class:`GateResult` given, rounded
for reading: dollars to whole dollars, points to whole points (one decimal below 10).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.planning.gate import MAX_REALISTIC_RUNS_PER_ARM, CriterionResult, GateResult

VERDICT_WORDS = {"PASS": "PASS", "FAIL": "FAIL", "INSUFFICIENT_DATA": "NOT YET"}

LABELS = {
    "projected_cost": "The bill at the target cadence",
    "quality_non_inferiority": "Quality not worse",
    "utilization_uplift": "Utilization uplift",
}
"""The name people use for every criterion :func:`app.planning.gate.evaluate_gate` makes."""

BASIS_WORDS = {"p90": "p90: 9 months in 10 cost less", "expected_bill": "expected bill"}
"""Which monthly figure the cost criterion compares with the budget, in words."""

SHORT = {"projected_cost": "cost", "quality_non_inferiority": "quality"}
SHORT_DEFAULT = "utilization"

# The PASS sentence reads cost, then quality, then utilization: the order a manager asks in.
_PASS_ORDER = ("projected_cost", "quality_non_inferiority", "utilization_uplift")


@dataclass(frozen=True)
class GateContext:
    """What the sentences need beyond the result: the cadences, the quality metric's
    name and the cost basis (p90 or the expected bill)."""

    target_runs_per_week: float
    current_runs_per_week: float | None
    quality_metric: str = "quality"


@dataclass(frozen=True)
class CriterionWords:
    """One row of the plain table; ``name`` is the gate's machine name."""

    name: str
    label: str
    plain: str
    status_label: str


@dataclass(frozen=True)
class GateWords:
    verdict: str
    headline: str
    criteria: tuple[CriterionWords, ...]


def dollars(value: float) -> str:
    """``1308.8593`` -> ``$1,309`` (whole dollars, thousands separators)."""
    sign = "-" if round(value) < 0 else ""
    return f"{sign}${abs(value):,.0f}"


def points(value: float, *, signed: bool = True, precise: bool = False) -> str:
    """``31.6`` -> ``+32``; ``4.44`` -> ``+4.4``; ``10.0`` -> ``+10``; ``-0.04`` -> ``0``;
    ``precise``: always one decimal (``31.77`` -> ``+31.8``)."""
    whole = abs(value) >= 9.95 and not precise
    text = f"{abs(value):.0f}" if whole else f"{abs(value):.1f}".removesuffix(".0")
    if text == "0":
        return "0"
    return ("-" if value < 0 else "+" if signed else "") + text


def cadence(runs_per_week: float) -> str:
    """``2.0`` -> ``2×/week``; ``1.5`` -> ``1.5×/week``; ``0.333`` -> ``0.33×/week``."""
    return f"{runs_per_week:.2f}".rstrip("0").rstrip(".") + "×/week"


CENTURY_WEEKS = 5200.0


def weeks(value: float) -> str:
    """``4.5`` -> ``4.5 weeks``; ``1.0`` -> ``1 week``; ``248`` -> ``248 weeks (4.8 years)``;
    beyond a century (a cadence near 0 once gave ``inf weeks (inf years)``): in words."""
    if not value <= CENTURY_WEEKS:  # NaN and inf included
        return "more than 100 years"
    text = f"{value:.1f}".removesuffix(".0") if value < 9.95 else f"{value:.0f}"
    unit = "week" if text == "1" else "weeks"
    years = f" ({value / 52:.1f} years)" if value >= 52 else ""
    return f"{text} {unit}{years}"


def metric(value: float) -> str:
    """A quality difference to 3 significant digits, without sign: ``0.00499`` -> ``0.005``."""
    return f"{abs(value):.3g}"


def runs_needed(runs: int, result: GateResult, ctx: GateContext) -> str:
    """``about 9 more runs per variant, 4.5 weeks at today's 2×/week, about $1,187``.

    Weeks = runs / today's cadence (both variants run side by side at today's cadence, as
    the gate's ``runs_needed_weeks`` assumes); dollars = runs x the cost of one baseline
    plus one candidate run, the gate's own ``runs_needed_usd / runs_needed_per_arm``.
    """
    parts = [f"about {runs} more run{'s' if runs != 1 else ''} per variant"]
    now = ctx.current_runs_per_week
    if now:
        parts.append(f"{weeks(runs / now)} at today's {cadence(now)}")
    if result.runs_needed_usd is not None and result.runs_needed_per_arm:
        pair = result.runs_needed_usd / result.runs_needed_per_arm
        parts.append(f"about {dollars(runs * pair)}")
    return ", ".join(parts)


def _cost_words(c: CriterionResult, ctx: GateContext) -> tuple[str, str]:
    """(the table cell, the headline clause) for the projected monthly cost."""
    at = cadence(ctx.target_runs_per_week)
    if c.value is None or c.threshold is None:
        return "no candidate runs to project the monthly cost from yet", "the cost is unknown"
    basis = f" ({BASIS_WORDS.get(c.basis, c.basis)})" if c.basis else ""
    budget = dollars(c.threshold)
    chance = "" if c.p_over_budget is None else f", {c.p_over_budget:.0%} chance over"
    if c.status == "pass":
        cell = f"{dollars(c.value)}/month of the {budget} budget at {at}{basis}{chance}"
        fits = f"the candidate fits the {budget} budget at {at}"
        return cell, f"{fits} ({dollars(c.value)}/month{chance})"
    # The gap between the rounded figures, so the sentence adds up for the reader.
    over = round(c.value) - round(c.threshold)
    gap = (
        f"{dollars(over)} over"
        if over >= 1
        else "just over"
        if c.value > c.threshold
        else "does not fit"
    )
    cell = f"{dollars(c.value)}/month at {at}, {gap} the {budget} budget{basis}{chance}"
    return cell, f"the candidate costs {dollars(c.value)}/month at {at}, {gap} the {budget} budget"


def _cannot_why(c: CriterionResult, have: str, need: str) -> str:
    """Why more runs will not make the criterion pass, from its own numbers."""
    if c.value is not None and c.threshold is not None and c.value <= c.threshold:
        return f"{have} so far is not above the {need} needed"
    return f"showing {need} would take more than {MAX_REALISTIC_RUNS_PER_ARM} more runs per variant"


def _utilization_words(c: CriterionResult) -> tuple[str, str]:
    if c.value is None or c.threshold is None:
        return "no runs to compare yet", "utilization cannot be compared yet"
    # +31.8 against +31.5 must not read "+32 (need +32)": one decimal when whole points tie.
    precise = points(c.value) == points(c.threshold) and c.value != c.threshold
    have = f"{points(c.value, precise=precise)} points"
    need_short = points(c.threshold, precise=precise)
    need = f"{need_short} points"
    cell = f"{have} (need {need_short})"
    moved = "up" if c.value >= 0 else "down"
    size = points(abs(c.value), signed=False, precise=precise)
    if c.cannot_pass:
        why = _cannot_why(c, have, need)
        return f"{cell}; cannot pass with more runs: {why}", (
            f"utilization cannot pass with more runs ({why})"
        )
    if c.status == "fail":
        only = "only " if moved == "up" else ""
        return cell, f"utilization is {moved} {only}{size} points, short of the {need} needed"
    if c.status == "undecided" and c.interval is None and c.runs_needed_per_arm is None:
        same = "every run had the same utilization, so the test cannot tell how reliable that is"
        return f"{cell}, but {same}", f"utilization cannot be judged: {same}"
    if c.status == "undecided":
        so_far = f"utilization is {moved} {size} points so far"
        return f"{have} so far (need {need_short})", so_far
    return cell, f"utilization is {moved} {size} points"


def _quality_words(c: CriterionResult, ctx: GateContext) -> tuple[str, str]:
    name = ctx.quality_metric
    if c.threshold is None:  # an arm reports no quality value at all
        cell = (
            f"no {name} values recorded for one or both variants: send quality_value with "
            "each run (more runs without it cannot decide this)"
        )
        return cell, f"quality cannot be judged: no {name} values recorded"
    if c.value is None:
        return f"no {name} values to compare yet", "quality cannot be compared yet"
    margin = metric(c.threshold)
    better = "better" if c.value > 0 else "worse"
    change = "no change" if c.value == 0 else f"{metric(c.value)} {better}"
    allowed = f"may be at most {margin} worse" if c.threshold else "may not be worse"
    if c.status == "pass":
        return f"{name} {change} ({allowed})", "quality is not worse"
    if c.status == "fail":
        return f"{name} {change}, more than the {margin} allowed", (
            f"quality ({name}) is {change}, more than the {margin} allowed"
        )
    if c.interval is None and c.runs_needed_per_arm is None:  # zero variance in both arms
        return (
            f"{name} {change}, but every run scored the same, so the test cannot tell how "
            "reliable that is"
        ), "quality cannot be judged: every run scored the same"
    return f"{name} {change} so far ({allowed})", f"quality is {change} so far"


def criterion_words(
    c: CriterionResult, result: GateResult, ctx: GateContext
) -> tuple[CriterionWords, str]:
    """The row for one criterion, and its clause for the headline."""
    if c.name == "projected_cost":
        cell, clause = _cost_words(c, ctx)
    elif c.name == "quality_non_inferiority":
        cell, clause = _quality_words(c, ctx)
    else:
        cell, clause = _utilization_words(c)
    status = {"pass": "pass", "fail": "fail"}.get(c.status, "not yet")
    if c.cannot_pass:
        status = "cannot pass"
    elif c.status == "undecided" and c.runs_needed_per_arm:
        needs = runs_needed(c.runs_needed_per_arm, result, ctx)
        if c.runs_needed_per_arm > MAX_REALISTIC_RUNS_PER_ARM:
            needs += ": more runs are unlikely to decide it"
        cell = f"{cell}; needs {needs}"
    label = LABELS.get(c.name, c.name.replace("_", " ").capitalize())
    return CriterionWords(c.name, label, cell, status), clause


def _join(items: list[str]) -> str:
    """``[a, b, c]`` -> ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def gate_words(result: GateResult, ctx: GateContext) -> GateWords:
    """Verdict, headline and rows for ``result``.

    - PASS: cost, quality and utilization, each as a clause.
    - FAIL: the failing criteria, then those that cannot pass with more runs.
    - NOT YET: the open criteria and the gate's runs still needed (the largest any open
      criterion asks for) in runs, weeks at today's cadence and dollars; failures and
      cannot-pass criteria follow, as the gate also waits for its minimum runs.
    """
    rows: list[CriterionWords] = []
    clauses: dict[str, str] = {}
    for c in result.criteria:
        row, clauses[c.name] = criterion_words(c, result, ctx)
        rows.append(row)
    failing = [clauses[c.name] for c in result.criteria if c.status == "fail"]
    failing += [clauses[c.name] for c in result.criteria if c.cannot_pass and c.status != "fail"]
    verdict = VERDICT_WORDS.get(result.verdict, result.verdict)
    if result.verdict == "PASS":
        order = sorted(clauses, key=lambda n: _PASS_ORDER.index(n) if n in _PASS_ORDER else 9)
        reason = _join([clauses[n] for n in order])
    elif result.verdict == "FAIL":
        reason = "; ".join(failing)
    else:
        reason = _not_yet(result, ctx, clauses)
        if failing:
            reason += "; already failing: " + "; ".join(failing)
    return GateWords(verdict, f"{verdict}: {reason}.", tuple(rows))


def _not_yet(result: GateResult, ctx: GateContext, clauses: dict[str, str]) -> str:
    open_ = [c for c in result.criteria if c.status == "undecided" and not c.cannot_pass]
    waiting = [SHORT.get(c.name, SHORT_DEFAULT) for c in open_ if c.runs_needed_per_arm]
    empty = [
        arm
        for arm, n in (("baseline", result.baseline_runs), ("candidate", result.candidate_runs))
        if n == 0
    ]
    if waiting and result.runs_needed_per_arm:
        needs = runs_needed(result.runs_needed_per_arm, result, ctx)
        if empty:  # nothing to compare yet: say which variant has no runs
            return f"no {' and no '.join(empty)} runs yet; the gate needs {needs}"
        verb = "needs" if len(waiting) == 1 else "need"
        return f"{_join(waiting)} {verb} {needs}"
    if open_:
        return "; ".join(clauses[c.name] for c in open_)
    return f"{result.baseline_runs} baseline and {result.candidate_runs} candidate runs are too few"
