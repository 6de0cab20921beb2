"""``cadence export --format focus``: runs as FinOps FOCUS cost-and-usage rows (1.2, or 1.0).

**An allocation (showback) shape, not a second invoice.** The GPU-hours a run used are
already on the cloud's own FOCUS export. Rows that carried the run's cost in
``BilledCost`` or ``EffectiveCost`` would be counted twice when a FinOps tool stacks the
two files. So every FOCUS cost column here is 0 (``PricingQuantity`` 0 at the run's unit
price: the spec's ``ListCost = ListUnitPrice x PricingQuantity`` holds), the GPU-hours
are in ``ConsumedQuantity``, and what Cadence allocates to the run is in ``x_`` columns
(``x_AllocatedCost``, ``x_AllocatedGpuHours``: FOCUS's prefix for columns of one's own,
which no FOCUS tool adds to the invoice). The join keys are the bill's: a run's tags
``cloud_resource_id`` (one id or several, comma-separated, spelt as the bill's
``ResourceId``), ``cloud_account_id`` (``SubAccountId``), ``cloud_billing_account_id``
(``BillingAccountId``), ``cloud_region`` (``RegionId``) and ``cluster``. A run on several
resources gives one row per resource, its hours and cost shared equally.

Standard library only (beside the pure planning functions), so the module can move to
the client package as one file. Cells a spreadsheet would run as formulas get a leading
``'``, as cadence_client/spreadsheet.py does for the other CSVs.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from app.planning.causes import BADPUT_CAUSES, IDLE_CAUSES
from app.planning.economics import badput
from app.planning.goodput import run_goodput
from app.planning.model import Interruption, RunFacts

VERSIONS = ("1.2", "1.0")
DEFAULT_VERSION = "1.2"
UNIT = "GPU-Hours"
# The spec's column ids, FOCUS 1.0 (ratified 2024-06), packed by hand: 43 names, 11 lines.
FOCUS_1_0 = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName",
    "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory",
    "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId",
    "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId",
    "RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory",
    "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
)  # fmt: skip
# What 1.1 and 1.2 added (the validator's 1.2 model lists them all), less the optional
# InvoiceId: Cadence issues no invoice, and a present InvoiceId must not be null.
# Packed by hand like FOCUS_1_0.
ADDED_IN_1_2 = (
    "BillingAccountType", "CapacityReservationId", "CapacityReservationStatus",
    "CommitmentDiscountQuantity", "CommitmentDiscountUnit", "InvoiceId", "PricingCurrency",
    "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice", "ServiceSubcategory", "SkuMeter", "SkuPriceDetails",
    "SubAccountType",
)  # fmt: skip
# Each cause of badput's column (app.planning.causes), in the causes' order.
CAUSE_COLUMNS = dict(
    zip(
        BADPUT_CAUSES,
        (
            "x_BadputDataStallGpuHours",
            "x_BadputCheckpointGpuHours",
            "x_BadputFailureGpuHours",
            "x_BadputOtherIdleGpuHours",
            "x_BadputFailedAttemptGpuHours",
        ),
        strict=True,
    )
)
EXTRA_COLUMNS = (
    "x_AllocatedCost",
    "x_AllocatedGpuHours",
    "x_Pipeline",
    "x_RunId",
    "x_Variant",
    "x_Cluster",
    "x_Workers",
    "x_GpuUtilization",
    "x_UtilizationSource",
    "x_Goodput",
    "x_ProductiveGpuHours",
    "x_BadputGpuHours",
    *CAUSE_COLUMNS.values(),
    "x_Outcome",
    "x_RetrainingId",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def columns(version: str = DEFAULT_VERSION) -> tuple[str, ...]:
    """The header of a ``version`` export: the spec's columns in order, then ours."""
    if version not in VERSIONS:
        raise ValueError(f"FOCUS version {version!r}: choose one of {', '.join(VERSIONS)}")
    spec = FOCUS_1_0 if version == "1.0" else tuple(sorted(FOCUS_1_0 + ADDED_IN_1_2))
    return spec + EXTRA_COLUMNS


COLUMNS = columns()


def text_cell(text: str) -> str:
    """``'=1+1`` for ``=1+1``: a spreadsheet shows it as text instead of running it. A
    negative number stays a number (cadence_client/spreadsheet.py holds the same rule)."""
    if not text.startswith(FORMULA_STARTS):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text


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
        # An attempt without a utilization figure: its cells say unknown (_goodput_cells).
        gpu_utilization=float(run.get("gpu_utilization") or 0.0),
        price_per_gpu_hour=float(run["effective_price_per_gpu_hour"]),
        data_stall_hours=float(run.get("data_stall_hours") or 0.0),
        checkpoint_hours=float(run.get("checkpoint_hours") or 0.0),
        scheduling_wait_hours=float(run.get("scheduling_wait_hours") or 0.0),
        mfu=run.get("mfu"),
        interruptions=interruptions,
    )


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 10))


def resource_ids(tags: Mapping[str, Any]) -> list[str]:
    """The cloud resources a run names in its ``cloud_resource_id`` tag, in order."""
    ids = [part.strip() for part in str(tags.get("cloud_resource_id") or "").split(",")]
    return list(dict.fromkeys(i for i in ids if i))


def _cloud_identity(tags: Mapping[str, Any], provider: str) -> dict[str, str]:
    account = str(tags.get("cloud_account_id") or "")
    billing = str(tags.get("cloud_billing_account_id") or account or "cadence")
    region = str(tags.get("cloud_region") or "")
    return {
        "ProviderName": provider,
        "PublisherName": provider,
        "InvoiceIssuerName": provider,
        "BillingAccountId": billing,
        "BillingAccountName": billing,
        "SubAccountId": account,
        "SubAccountName": account,
        "RegionId": region,
        "RegionName": region,
        "x_Cluster": str(tags.get("cluster") or ""),
    }


def _goodput_cells(run: Mapping[str, Any], facts: RunFacts, share: float) -> dict[str, str]:
    """Goodput and badput of the run's share; an attempt that did not succeed is all
    failed-attempt badput, one without utilization has no productive/badput split
    (docs/methodology.md §2)."""
    outcome = str(run.get("outcome") or "succeeded")
    attempt = {
        "x_Outcome": outcome,
        "x_RetrainingId": str(run.get("retraining_id") or run.get("run_id") or ""),
        "x_BadputFailedAttemptGpuHours": _number(0.0),
    }
    if outcome != "succeeded":
        hours = _number(facts.gpu_hours * share)
        names = [CAUSE_COLUMNS[c] for c in IDLE_CAUSES]
        return {
            "x_Workers": str(facts.workers),
            "x_GpuUtilization": _number(run.get("gpu_utilization")),
            "x_Goodput": _number(0.0),
            "x_ProductiveGpuHours": _number(0.0),
            "x_BadputGpuHours": hours,
            **dict.fromkeys(names, _number(0.0)),
            **attempt,
            "x_BadputFailedAttemptGpuHours": hours,
        }
    if run.get("gpu_utilization") is None:
        return {"x_Workers": str(facts.workers), **attempt}  # the split is unknown: empty
    b = badput(facts)
    return {
        **attempt,
        "x_Workers": str(facts.workers),
        "x_GpuUtilization": _number(facts.gpu_utilization),
        "x_Goodput": _number(run_goodput(facts).overall),
        "x_ProductiveGpuHours": _number(b.productive * share),
        "x_BadputGpuHours": _number(b.idle * share),
        **{CAUSE_COLUMNS[c]: _number(getattr(b, c) * share) for c in IDLE_CAUSES},
    }


def focus_rows(
    run: Mapping[str, Any], *, provider: str = "Unknown", version: str = DEFAULT_VERSION
) -> list[dict[str, str]]:
    """The rows of one run: one per cloud resource it names (one row if it names none),
    every cell CSV text (empty = null)."""
    names = columns(version)
    facts = run_facts(run)
    tags = dict(run.get("tags") or {})
    resources = resource_ids(tags) or [""]
    share = 1.0 / len(resources)
    common = _run_cells(run, facts, tags, share, provider, version)
    sku, pipeline, run_id = common["SkuId"], common["x_Pipeline"], common["x_RunId"]
    rows = []
    for resource in resources:
        row = dict.fromkeys(names, "")
        row.update({k: v for k, v in common.items() if k in row})
        row["ResourceId"] = resource
        row["ResourceName"] = resource or run_id
        row["ChargeDescription"] = (
            f"{facts.gpu_hours * share:.2f} GPU-hours of {sku} for {pipeline} run {run_id} "
            f"({common['x_Variant']}){' on ' + resource if resource else ''}: allocation, "
            "billed by the provider"
        )
        rows.append({k: text_cell(v) for k, v in row.items()})
    return rows


def _run_cells(
    run: Mapping[str, Any],
    facts: RunFacts,
    tags: dict[str, Any],
    share: float,
    provider: str,
    version: str,
) -> dict[str, str]:
    """The cells every row of a run shares (its ``share`` of the hours on each)."""
    started, finished = _utc(run["started_at"]), _utc(run["finished_at"])
    period_start, period_end = billing_month(started)
    price = facts.price_per_gpu_hour
    variant = str(run["variant"])
    sku = str(run.get("gpu_type") or "") or "GPU"
    cells = {
        **_cloud_identity(tags, provider),
        **_goodput_cells(run, facts, share),
        # Cadence invoices nothing: the cloud's export carries the charge (module doc).
        **dict.fromkeys(("BilledCost", "EffectiveCost", "ListCost", "ContractedCost"), "0.0"),
        "PricingQuantity": "0.0",
        "ListUnitPrice": _number(price),
        "ContractedUnitPrice": _number(price),
        "BillingCurrency": "USD",
        "BillingPeriodStart": _iso(period_start),
        "BillingPeriodEnd": _iso(period_end),
        "ChargePeriodStart": _iso(started),
        "ChargePeriodEnd": _iso(finished),
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "ConsumedQuantity": _number(facts.gpu_hours * share),
        "ConsumedUnit": UNIT,
        "PricingCategory": "Standard",
        "PricingUnit": UNIT,
        "ResourceType": "Training run",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "GPU training",
        "SkuId": sku,
        "SkuPriceId": f"{sku} at {price:g} USD per GPU-hour",
        "Tags": json.dumps({"variant": variant, **tags}, ensure_ascii=False, sort_keys=True),
        "x_AllocatedCost": _number(facts.gpu_hours * price * share),
        "x_AllocatedGpuHours": _number(facts.gpu_hours * share),
        "x_Pipeline": str(run["pipeline"]),
        "x_RunId": str(run["run_id"]),
        "x_Variant": variant,
        "x_UtilizationSource": str(run.get("utilization_source") or ""),
    }
    if version != "1.0":
        cells.update({"PricingCurrency": "USD", "ServiceSubcategory": "AI Platforms"})
    return cells


def write_focus(
    runs: Iterable[Mapping[str, Any]],
    out: TextIO,
    *,
    provider: str = "Unknown",
    version: str = DEFAULT_VERSION,
) -> int:
    """The FOCUS header, then each run's rows; returns the number of runs written."""
    writer = csv.DictWriter(out, fieldnames=columns(version), lineterminator="\n")
    writer.writeheader()
    count = 0
    for run in runs:
        if not run.get("finished_at"):  # still running: its charge is not known until it ends
            continue
        writer.writerows(focus_rows(run, provider=provider, version=version))
        count += 1
    return count
