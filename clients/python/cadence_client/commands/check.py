"""``cadence check``: a cost gate for CI. Projects the monthly cost of a proposed scenario
(cadence and what-ifs) with the server's projection endpoint, compares it with today's
and with the pipeline's budget, prints a Markdown summary for a pull-request comment,
and exits 1 when over a limit or the budget.

The proposed cost is the projection's ``expected_bill_usd`` when the server gives one
(the bill including failed attempts), else its ``monthly_cost_usd``; today is the
production variant's bill at its current cadence (``current_monthly_cost_usd``, also
with ``--variant``). The budget is the server's one test (``within_budget``: P(bill >
budget) against the risk tolerance), the word its pages say; the ceiling is held against
the bill at risk (``bill_at_risk_usd``, the p90 at 10%). Older servers: the pipeline's
cost basis (``scenario.cost_basis``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from cadence_client.client import CadenceClient
from cadence_client.commands.report import OK, USAGE, _connection_args, answer_with_client
from cadence_client.cost_check import BASIS_NAMES, BudgetTest, CostCheck, CostLimits, check_cost

OVER = 1
EXIT_CODES = """exit codes:
  0  within every limit given and the pipeline's budget (if it has one)
  1  over a limit or the budget
  2  usage error, or the server cannot project this pipeline (unknown, no runs yet)
  4  authentication (401) or authorization (403) failed
  5  the server was unavailable after retries"""
SCENARIO_FLAGS = (
    ("price", float, "USD per GPU-hour"),
    ("utilization_target", float, "busy fraction the change reaches, e.g. 0.7"),
    ("workers", int, "workers per run"),
    ("failure_rate", float, "failures per instance-hour"),
)
# The projection's query parameters are the scenario flags' names.
FLAG_OF_PARAMETER = {name: "--" + name.replace("_", "-") for name, _, _ in SCENARIO_FLAGS}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="CI cost gate: is a proposed cadence/scenario within the cost limits?",
        description="Compare the projected monthly cost of a proposed scenario with "
        "today's (the pipeline's current cadence, recorded runs, no what-ifs) and print "
        "a Markdown summary.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_args(p, "a read token (default: $CADENCE_TOKEN; not needed in open read mode)")
    p.add_argument("--pipeline", required=True, help="pipeline slug")
    p.add_argument(
        "--variant", help="project this variant's runs (default: the pipeline's current one)"
    )
    p.add_argument("--cadence", type=float, help="proposed runs per week (default: today's)")
    for name, kind, text in SCENARIO_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
    p.add_argument("--weeks-per-month", choices=("calendar", "four_week"), default="calendar")
    p.add_argument("--max-increase-pct", type=float, help="limit on the rise, percent")
    p.add_argument("--max-increase-usd", type=float, help="limit on the rise, USD per month")
    p.add_argument("--max-monthly-usd", type=float, help="limit on the proposed monthly cost")
    p.add_argument(
        "--no-budget",
        action="store_true",
        help="do not judge the pipeline's monthly budget (judged by default when it has one)",
    )
    p.set_defaults(func=run_check)


def run_check(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    def check(client: CadenceClient) -> int:
        cadence = args.cadence
        if cadence is None:
            found = [p for p in client.list_pipelines() if p.get("name") == args.pipeline]
            if not found:
                _say(f"cadence: no pipeline named {args.pipeline!r}", error=True)
                return USAGE
            cadence = float(found[0]["runs_per_week"])
        scenario = {name: getattr(args, name) for name, _, _ in SCENARIO_FLAGS}
        out = client.projection(
            args.pipeline,
            cadences=[cadence],
            weeks_per_month=args.weeks_per_month,
            variant=args.variant,
            **scenario,
        )
        return _judged(args, out)

    lead = f"cannot project {args.pipeline!r}: "
    return answer_with_client(
        args, check, transport=transport, sleep=sleep, terms=FLAG_OF_PARAMETER, lead=lead
    )


def _judged(args: argparse.Namespace, out: dict[str, Any]) -> int:
    """The projection's proposed cost against the limits: said, and the exit code."""
    variant = args.variant or out["current_variant"]
    if variant not in out.get("projections", {}):
        _say(f"cadence: no runs of variant {variant!r} to project", error=True)
        return USAGE
    projection = out["projections"][variant]
    today = projection["current_monthly_cost_usd"]
    proposed = projection["cadences"][0]
    scenario = out.get("scenario") or {}
    budget = None if args.no_budget else scenario.get("budget_usd")
    limits = CostLimits(*limits_given(args), budget_usd=budget)
    cost = proposed.get("expected_bill_usd", proposed["monthly_cost_usd"])
    basis, judged, test = judged_on(scenario, proposed, cost)
    result = check_cost(
        float(today), float(cost), limits, judged_usd=float(judged), basis=basis, budget_test=test
    )
    print(summary(args, result, projection, proposed, limits))
    return OK if result.passed else OVER


def judged_on(
    scenario: dict[str, Any], proposed: dict[str, Any], cost: float
) -> tuple[str, float, BudgetTest | None]:
    """(basis, the figure judged, the one test) from what the server says: a server with
    the risk tolerance judges the budget itself (``within_budget``) and names the bill at
    risk; an older one, the pipeline's cost basis."""
    tolerance = scenario.get("risk_tolerance")
    if tolerance is not None and "bill_at_risk_usd" in proposed:
        fits, p_over = proposed.get("within_budget"), proposed.get("p_over_budget")
        test = None if fits is None or p_over is None else BudgetTest(fits, p_over, tolerance)
        return "at_risk", float(proposed["bill_at_risk_usd"]), test
    basis = scenario.get("cost_basis", "expected_bill")  # servers before the basis: expected
    judged = proposed.get("bill_p90_usd", cost) if basis == "p90" else cost
    return basis, float(judged), None


def judged_words(result: CostCheck, proposed: dict[str, Any]) -> str:
    """How the proposal was judged, in one sentence of the summary."""
    name = BASIS_NAMES.get(result.basis, "expected bill")
    if result.basis == "at_risk":
        p_over = proposed.get("p_over_budget")
        chance = "" if p_over is None else f", a {p_over:.0%} chance of going over the budget"
        return (
            f"The budget is judged by the chance of going over it against the server's risk "
            f"tolerance, as every page of the server is{chance}; a ceiling is held against the "
            f"{name} ${result.judged_usd:,.2f} a month."
        )
    return (
        f"Limits on the monthly cost and the budget are judged on the {name} (the "
        f"pipeline's cost basis): ${result.judged_usd:,.2f} a month."
    )


def limits_given(args: argparse.Namespace) -> tuple[float | None, float | None, float | None]:
    return args.max_increase_pct, args.max_increase_usd, args.max_monthly_usd


def _say(text: str, *, error: bool = False) -> None:
    print(text, file=sys.stderr if error else sys.stdout)


def _scenario(args: argparse.Namespace, runs_per_week: float) -> str:
    parts = [f"{runs_per_week:g}×/week"]
    if args.utilization_target is not None:
        parts.append(f"utilization {args.utilization_target:.0%}")
    if args.price is not None:
        parts.append(f"${args.price:g}/GPU-hour")
    if args.workers is not None:
        parts.append(f"{args.workers} workers")
    if args.failure_rate is not None:
        parts.append(f"failure rate {args.failure_rate:g}/instance-hour")
    return ", ".join(parts)


def summary(
    args: argparse.Namespace,
    result: CostCheck,
    projection: dict[str, Any],
    proposed: dict[str, Any],
    limits: CostLimits,
) -> str:
    """A short Markdown report: the two costs, the change, the verdict and why."""
    pct = f" ({result.increase_pct:+.1f}%)" if result.increase_pct is not None else ""
    today_rpw = projection.get("current_runs_per_week") or 0.0
    lines = [
        f"### Cadence cost check: `{args.pipeline}`"
        + (f" (variant `{args.variant}`)" if args.variant else ""),
        "",
        "| | Scenario | Monthly cost |",
        "| --- | --- | ---: |",
        f"| Today | {today_rpw:g}×/week, as recorded | ${result.today_usd:,.2f} |",
        f"| Proposed | {_scenario(args, float(proposed['runs_per_week']))} "
        f"| ${result.proposed_usd:,.2f} |",
        f"| Change | | {'+' if result.increase_usd >= 0 else '-'}"
        f"${abs(result.increase_usd):,.2f}{pct} |",
        "",
        f"Proposed range (p10–p90): ${proposed['monthly_cost_p10_usd']:,.2f} – "
        f"${proposed['monthly_cost_p90_usd']:,.2f} a month, from {projection['runs_used']} "
        f"recent runs ({args.weeks_per_month.replace('_', '-')} months).",
        "",
        judged_words(result, proposed),
        "",
    ]
    given = [
        f"+{limits.max_increase_pct:g}%" if limits.max_increase_pct is not None else None,
        f"+${limits.max_increase_usd:,.2f}" if limits.max_increase_usd is not None else None,
        f"${limits.max_monthly_usd:,.2f}/month" if limits.max_monthly_usd is not None else None,
        f"budget ${limits.budget_usd:,.2f}/month" if limits.budget_usd is not None else None,
    ]
    shown = ", ".join(g for g in given if g) or "none given"
    if result.passed:
        lines.append(f"**PASS**: within the limits ({shown}).")
    else:
        lines.append(f"**OVER LIMIT**: {'; '.join(result.breaches)}.")
    lines += [f"> ⚠ {w}" for w in projection.get("warnings", [])]
    return "\n".join(lines)
