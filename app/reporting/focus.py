"""``cadence export --format focus``: runs as FinOps FOCUS 1.0 cost-and-usage rows.

One row per run: the run is the charge. Cadence records what a run paid per GPU-hour
and nothing about discounts, so BilledCost, EffectiveCost, ListCost and ContractedCost
are all GPU-hours x the run's price (and the unit prices all that price). The charge
period is the run's wall clock; the billing period the UTC calendar month it started
in. Goodput and badput ride along as ``x_`` columns (FOCUS's prefix for columns of
one's own), from the same pure functions as the dashboard (DOMAIN.md §2-3).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from app.planning.economics import badput
from app.planning.goodput import run_goodput
from app.planning.model import Interruption, RunFacts

FOCUS_VERSION = "1.0"
UNIT = "GPU-Hours"
FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuer",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "Provider",
    "Publisher",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
EXTRA_COLUMNS = (
    "x_Pipeline",
    "x_RunId",
    "x_Variant",
    "x_Workers",
    "x_GpuUtilization",
    "x_UtilizationSource",
    "x_Goodput",
    "x_ProductiveGpuHours",
    "x_BadputGpuHours",
    "x_BadputDataStallGpuHours",
    "x_BadputCheckpointGpuHours",
    "x_BadputFailureGpuHours",
    "x_BadputOtherIdleGpuHours",
)
COLUMNS = FOCUS_COLUMNS + EXTRA_COLUMNS


def _utc(value: Any) -> datetime:
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def billing_month(when: datetime) -> tuple[datetime, datetime]:
    """The UTC calendar month holding ``when``: [first day, first day of the next)."""
    start = datetime(when.year, when.month, 1, tzinfo=UTC)
    end = datetime(when.year + when.month // 12, when.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def run_facts(run: Mapping[str, Any]) -> RunFacts:
    """A run as the API returns it (RunOut) as planning facts."""
    interruptions = tuple(
        Interruption(i["lost_progress_hours"], i["resume_hours"], i["reschedule_hours"])
        for i in run.get("interruptions") or []
    )
    return RunFacts(
        workers=int(run["workers"]),
        wall_clock_hours=float(run["wall_clock_hours"]),
        gpu_hours=float(run["gpu_hours"]),
        gpu_utilization=float(run["gpu_utilization"]),
        price_per_gpu_hour=float(run["effective_price_per_gpu_hour"]),
        data_stall_hours=float(run.get("data_stall_hours") or 0.0),
        checkpoint_hours=float(run.get("checkpoint_hours") or 0.0),
        scheduling_wait_hours=float(run.get("scheduling_wait_hours") or 0.0),
        mfu=run.get("mfu"),
        interruptions=interruptions,
    )


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 10))


def focus_row(
    run: Mapping[str, Any], *, provider: str = "Unknown", billing_account: str = "cadence"
) -> dict[str, str]:
    """One FOCUS 1.0 row for one run (every cell as CSV text; empty = null)."""
    facts = run_facts(run)
    started, finished = _utc(run["started_at"]), _utc(run["finished_at"])
    period_start, period_end = billing_month(started)
    price = facts.price_per_gpu_hour
    cost = facts.gpu_hours * price
    b = badput(facts)
    pipeline, run_id, variant = str(run["pipeline"]), str(run["run_id"]), str(run["variant"])
    gpu = str(run.get("gpu_type") or "") or None
    sku = gpu or "GPU"
    tags = {"variant": variant, **dict(run.get("tags") or {})}
    row: dict[str, str] = dict.fromkeys(COLUMNS, "")
    row.update(
        {
            "BilledCost": _number(cost),
            "EffectiveCost": _number(cost),
            "ListCost": _number(cost),
            "ContractedCost": _number(cost),
            "ListUnitPrice": _number(price),
            "ContractedUnitPrice": _number(price),
            "BillingAccountId": billing_account,
            "BillingCurrency": "USD",
            "BillingPeriodStart": _iso(period_start),
            "BillingPeriodEnd": _iso(period_end),
            "ChargePeriodStart": _iso(started),
            "ChargePeriodEnd": _iso(finished),
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "ChargeDescription": f"{facts.gpu_hours:.2f} GPU-hours of {gpu or 'GPU'} for "
            f"{pipeline} run {run_id} ({variant})",
            "ConsumedQuantity": _number(facts.gpu_hours),
            "ConsumedUnit": UNIT,
            "PricingCategory": "Standard",
            "PricingQuantity": _number(facts.gpu_hours),
            "PricingUnit": UNIT,
            "InvoiceIssuer": provider,
            "Provider": provider,
            "Publisher": provider,
            "ResourceId": f"{pipeline}/{run_id}",
            "ResourceName": run_id,
            "ResourceType": "Training run",
            "ServiceCategory": "AI and Machine Learning",
            "ServiceName": "GPU training",
            "SkuId": sku,
            "SkuPriceId": f"{sku} at {price:g} USD per GPU-hour",
            "SubAccountId": pipeline,
            "SubAccountName": pipeline,
            "Tags": json.dumps(tags, ensure_ascii=False, sort_keys=True),
            "x_Pipeline": pipeline,
            "x_RunId": run_id,
            "x_Variant": variant,
            "x_Workers": str(facts.workers),
            "x_GpuUtilization": _number(facts.gpu_utilization),
            "x_UtilizationSource": str(run.get("utilization_source") or ""),
            "x_Goodput": _number(run_goodput(facts).overall),
            "x_ProductiveGpuHours": _number(b.productive),
            "x_BadputGpuHours": _number(b.idle),
            "x_BadputDataStallGpuHours": _number(b.data_stall),
            "x_BadputCheckpointGpuHours": _number(b.checkpoint),
            "x_BadputFailureGpuHours": _number(b.failure),
            "x_BadputOtherIdleGpuHours": _number(b.other_idle),
        }
    )
    return row


def write_focus(
    runs: Iterable[Mapping[str, Any]],
    out: TextIO,
    *,
    provider: str = "Unknown",
    billing_account: str = "cadence",
) -> int:
    """The FOCUS header, then one row per run; returns the number of runs written."""
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    count = 0
    for run in runs:
        writer.writerow(focus_row(run, provider=provider, billing_account=billing_account))
        count += 1
    return count
