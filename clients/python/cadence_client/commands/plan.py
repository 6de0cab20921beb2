"""``cadence plan``: the organisation's cadence plan as Markdown (for a CI job summary or
a pull request), from the server's ``GET /api/v1/portfolio/plan``. Every number is the
server's; this only lays them out: the answer in words, then one row per pipeline."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import httpx

from cadence_client.client import CadenceClient
from cadence_client.commands.report import OK, _connection_args, answer_with_client

NO_PLAN = 1
EXIT_CODES = """exit codes:
  0  a plan fits the budget at the risk
  1  no plan fits: even the slowest cadences go over (the summary says what would fit)
  2  usage error (a bad --budget or --risk, or no org budget set and none given)
  4  authentication (401) or authorization (403) failed
  5  the server was unavailable after retries"""
FLAGS = {"budget": "--budget", "risk": "--risk", "team": "--team"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="the org cadence plan: which pipelines should retrain more or less often",
        description="With one monthly budget and a risk of going over, the cadence of each "
        "pipeline that minimises expected bill plus staleness cost, as Markdown.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_args(p, "a read token (default: $CADENCE_TOKEN; not needed in open read mode)")
    p.add_argument("--budget", type=float, help="USD a month (default: the org budget set)")
    p.add_argument("--risk", type=float, help="share of months allowed over, e.g. 0.1")
    p.add_argument("--team", help="only this team's pipelines")
    p.set_defaults(func=run_plan)


def run_plan(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    def plan(client: CadenceClient) -> int:
        out = client.org_plan(budget=args.budget, risk=args.risk, team=args.team)
        print(markdown(out))
        return OK if out.get("feasible") else NO_PLAN

    return answer_with_client(
        args, plan, transport=transport, sleep=sleep, terms=FLAGS, lead="cannot plan: "
    )


def _usd(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    sign = ("+" if x > 0.5 else "-" if x < -0.5 else "") if signed else ""
    return f"{sign}${abs(x):,.0f}"


def _cadence(k: float) -> str:
    return f"{k:g}×/week"


def markdown(out: dict[str, Any]) -> str:
    """The sentence, the table, the org bill, the $1,000 steps and the thin inputs."""
    lines = [
        "### Cadence plan" + (f": team `{out['team']}`" if out.get("team") else ""),
        "",
        str(out["sentence"]),
        "",
        "| Pipeline | Today | Proposed | Expected bill | Staleness cost | Why |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in out.get("pipelines", []):
        why = str(r["why"]).replace("|", "/")
        lines.append(
            f"| `{r['name']}` | {_cadence(r['today_runs_per_week'])} "
            f"| {_cadence(r['proposed_runs_per_week'])} | {_usd(r['bill_change_usd'], True)} "
            f"| {_usd(r['staleness_change_usd'], True)} | {why} |"
        )
    lines += [
        "",
        f"Org bill: {_usd(out['expected_bill_usd'])} expected, p90 {_usd(out['bill_p90_usd'])}, "
        f"P(over {_usd(out['budget_usd'])}) {out['p_over_budget']:.0%}.",
    ]
    for key, label in (("next_thousand", "$1,000 more"), ("cut_thousand", "$1,000 less")):
        if out.get(key):
            lines.append(f"- {label}: {out[key]['sentence']}")
    for s in out.get("sensitivity", []):
        lines.append(
            f"- `{s['pipeline']}`'s {s['input']} is thin: at half, {s['at_half']}; "
            f"at double, {s['at_double']}."
        )
    if out.get("without_runs"):
        lines.append(
            f"- Not planned (no production runs to bill yet): {', '.join(out['without_runs'])}."
        )
    return "\n".join(lines)
