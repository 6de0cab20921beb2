"""A cloud's FOCUS export (CSV or Parquet; FOCUS 1.0 to 1.2) read as GPU line items.

Everything is checked before anything is stored: a file that is not FOCUS, a version
Cadence cannot read, a currency mix, or a row without a needed value raises
:class:`BillError` naming the file, the row and the column, and the command stores
nothing from it. Rows that name no GPU (storage, network, CPU instances) are counted
and skipped: the reconciliation is about GPU spend.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.billing.gpu_catalog import gpus_per_unit, unknown_gpu_types
from app.billing.stream import BillError as BillError  # re-exported: callers import it here
from app.billing.stream import open_rows
from app.planning.reconcile import resource_tail

NEEDED = (
    "BilledCost",
    "BillingCurrency",
    "ChargeCategory",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "EffectiveCost",
    "ProviderName",
    "ResourceId",
)
# Names of the drafts before 1.0 (0.5, 1.0-preview), and of 1.3 and later.
DRAFT_NAMES = ("Provider", "ChargeType", "UsageDateTimeStart", "AmortizedCost")
LATER_NAMES = ("ServiceProviderName", "HostProviderName", "AllocatedMethodId")
ADDED_IN_1_1 = ("CapacityReservationId", "SkuMeter", "SkuPriceDetails", "ServiceSubcategory")
ADDED_IN_1_2 = ("InvoiceId", "PricingCurrency", "BillingAccountType", "SubAccountType")
# Where the clouds name the instance type or the GPU SKU of a line.
SKU_TEXT = (
    "ChargeDescription",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuId",
    "ResourceType",
    "x_UsageType",
    "x_SkuMeterName",
    "x_SkuDescription",
    "x_SkuMeterSubcategory",
    "x_SkuMeterCategory",
    "x_SkuDetails",
    "x_ServiceCode",
)
# Azure's exports in a local currency carry the USD amounts beside it.
USD_COLUMNS = {"BilledCost": "x_BilledCostInUsd", "EffectiveCost": "x_EffectiveCostInUsd"}
MAX_UNKNOWN = 50  # instance types named in the notice, at most
HOUR_UNITS = frozenset({"hour", "hours", "hrs", "hr", "1 hour", "gpu-hours", "gpu hours"})
PIPELINE_TAG = "cadence_pipeline"


# Plausible bounds of one line (docs/finops.md): a line of a billion dollars, or of a
# million hours of one resource (114 years), is a broken export, not a charge. Refused
# with the row and the column rather than stored as 1e308 (or Infinity) and printed.
MONEY_LIMIT = 1e9
HOURS_LIMIT = 1e6
YEARS = (2000, 2100)  # charge periods outside these years are not a cloud bill's
TAGS_LIMIT = 65_536  # characters of one Tags cell
# What one charge is, whatever the export's shape: two exports (FOCUS 1.0 and 1.2, CSV
# and Parquet) of one charge give one key; an hourly and a daily export differ in
# period, and the import replaces the one with the other (app/billing/service.py).
# Packed by hand: one name a line would take this module to 399 of its 400 lines.
CHARGE_COLUMNS = ("ProviderName", "BillingAccountId", "SubAccountId", "ResourceId",
                  "ChargeCategory", "ChargeClass", "CommitmentDiscountId",
                  "CommitmentDiscountStatus", "SkuId", "SkuPriceId")  # fmt: skip


@dataclass(frozen=True)
class LineItem:
    row_key: str
    focus_version: str
    provider: str
    billing_account_id: str
    sub_account_id: str
    region_id: str
    resource_id: str
    resource_tail: str
    sku: str
    charge_category: str
    commitment_status: str
    charge_period_start: datetime
    charge_period_end: datetime
    currency: str
    billed_cost: float
    effective_cost: float
    list_cost: float | None
    gpus_per_unit: float
    gpu_hours: float
    pipeline_tag: str | None


def focus_version(source: str, header: list[str]) -> str:
    """The FOCUS version a header is written in, or a BillError saying why not."""
    names = set(header)
    if not names & {"BilledCost", "EffectiveCost", "ChargePeriodStart"}:
        shown = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
        raise BillError(
            f"{source}: not a FOCUS file (no BilledCost, EffectiveCost or "
            f"ChargePeriodStart column; found {shown or 'no header'})"
        )
    if "ProviderName" not in names:
        later = ", ".join(n for n in LATER_NAMES if n in names)
        draft = ", ".join(n for n in DRAFT_NAMES if n in names) or "no ProviderName"
        which = f"FOCUS 1.3 or later ({later})" if later else f"a FOCUS draft before 1.0 ({draft})"
        raise BillError(
            f"{source}: {which}: Cadence reads FOCUS 1.0 to 1.2 (column ProviderName missing)"
        )
    missing = [n for n in NEEDED if n not in names]
    if missing:
        raise BillError(f"{source}: column {', '.join(missing)} missing (needed to reconcile)")
    if any(n in names for n in ADDED_IN_1_2):
        return "1.2"
    return "1.1" if any(n in names for n in ADDED_IN_1_1) else "1.0"


def _text(value: Any) -> str:
    if type(value) is str:  # nearly every cell of a CSV: the fast path
        return value.strip()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value).strip()


class Row:
    """One row with its place in the file, for messages."""

    def __init__(self, source: str, number: int, cells: Mapping[str, Any]) -> None:
        self.source, self.index, self.cells = source, number, cells

    def fail(self, column: str, reason: str) -> BillError:
        return BillError(
            f"{self.source} row {self.index}, column {column}: {reason}",
            fields=[{"field": f"{self.source}:{self.index}:{column}", "reason": reason}],
        )

    def text(self, column: str) -> str:
        return _text(self.cells.get(column))

    def number(
        self, column: str, *, required: bool = True, limit: float = MONEY_LIMIT
    ) -> float | None:
        """The cell as a finite number within +-``limit``."""
        raw = self.cells.get(column)
        value: float | None = None
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            value = float(raw)
        else:
            text = _text(raw)
            if not text:
                if required:
                    raise self.fail(column, "empty; a number is needed")
                return None
            try:
                value = float(text)
            except ValueError:
                raise self.fail(column, f"{text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise self.fail(column, f"{value!r} is not a finite number")
        if abs(value) > limit:
            raise self.fail(column, f"{value:g} is beyond +-{limit:g}: not a plausible charge")
        return value

    def when(self, column: str) -> datetime:
        raw = self.cells.get(column)
        if isinstance(raw, datetime):
            try:
                when = raw.astimezone(UTC) if raw.tzinfo else raw.replace(tzinfo=UTC)
            except OverflowError:
                raise self.fail(column, f"{raw} is not a plausible timestamp") from None
            return self._in_years(column, when)
        text = _text(raw)
        if not text:
            raise self.fail(column, "empty; an ISO 8601 timestamp is needed")
        cleaned = text.removesuffix(" UTC").replace("Z", "+00:00")
        try:
            when = datetime.fromisoformat(cleaned)
            when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
        except (ValueError, OverflowError):  # year 0001 with an offset: before year 1 in UTC
            raise self.fail(column, f"{text[:40]!r} is not an ISO 8601 timestamp") from None
        return self._in_years(column, when)

    def _in_years(self, column: str, when: datetime) -> datetime:
        if not YEARS[0] <= when.year < YEARS[1]:
            raise self.fail(column, f"{when.year} is outside {YEARS[0]} to {YEARS[1] - 1}")
        return when

    def tags(self) -> dict[str, str]:
        raw = self.cells.get("Tags")
        if isinstance(raw, dict):
            return {str(k): _text(v) for k, v in raw.items()}
        text = raw if isinstance(raw, list) else _text(raw)
        if not text:
            return {}
        if isinstance(text, str) and len(text) > TAGS_LIMIT:
            raise self.fail("Tags", f"{len(text)} characters; at most {TAGS_LIMIT}")
        try:
            parsed = json.loads(text) if isinstance(text, str) else text
        except json.JSONDecodeError:
            raise self.fail("Tags", "not JSON") from None
        except RecursionError:
            raise self.fail("Tags", "nested too deep") from None
        if parsed is None:
            return {}
        if isinstance(parsed, dict):
            return {str(k): _text(v) for k, v in parsed.items()}
        # Parquet maps arrive as (key, value) pairs, GCP's as [{"key": .., "value": ..}].
        listed: list[Any] = parsed if isinstance(parsed, list) else [None]
        pairs = [(p.get("key"), p.get("value")) if isinstance(p, dict) else p for p in listed]
        if any(not isinstance(p, tuple | list) or len(p) != 2 for p in pairs):
            raise self.fail("Tags", "neither a JSON object nor a list of key-value pairs")
        return {str(k): _text(v) for k, v in pairs}


def charge_key(row: Row, start: datetime, end: datetime) -> str:
    """What one charge is (CHARGE_COLUMNS and its period), hashed: the same charge read
    from any export of it, FOCUS 1.0 or 1.2, CSV or Parquet, is the same key."""
    parts = [row.text(c) for c in CHARGE_COLUMNS] + [start.isoformat(), end.isoformat()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _pipeline_tag(tags: Mapping[str, str]) -> str | None:
    """The ``cadence_pipeline`` tag, however the cloud prefixes user tags (``user:``)."""
    for key, value in tags.items():
        if key.rsplit(":", 1)[-1].rsplit("/", 1)[-1] == PIPELINE_TAG and value:
            return value
    return None


def _hours(row: Row, start: datetime, end: datetime) -> float:
    """Hours the line paid for: the consumed or priced quantity when it is in hours,
    else the charge period (one resource for the period)."""
    for quantity, unit in (
        ("ConsumedQuantity", "ConsumedUnit"),
        ("PricingQuantity", "PricingUnit"),
    ):
        if row.text(unit).lower() in HOUR_UNITS:
            value = row.number(quantity, required=False, limit=HOURS_LIMIT)
            if value is not None:
                return value
    return (end - start).total_seconds() / 3600.0


def _costs(row: Row, in_usd: bool) -> tuple[float, float, float | None]:
    billed = row.number(USD_COLUMNS["BilledCost"] if in_usd else "BilledCost") or 0.0
    effective = row.number(USD_COLUMNS["EffectiveCost"] if in_usd else "EffectiveCost") or 0.0
    return billed, effective, None if in_usd else row.number("ListCost", required=False)


@functools.lru_cache(maxsize=4096)
def _gpus(texts: tuple[str, ...]) -> float | None:
    """:func:`gpus_per_unit`, once per SKU text: a bill repeats a few (~40 us each)."""
    return gpus_per_unit(texts)


def line_item(row: Row, version: str, in_usd: bool = False) -> LineItem | None:
    """The row as a GPU line item, None when it names no GPU. ``in_usd``: the costs
    from Azure's ``x_...InUsd`` columns (the bill is in another currency)."""
    gpus = _gpus(tuple(row.text(c) for c in SKU_TEXT))
    if gpus is None:
        return None
    start, end = row.when("ChargePeriodStart"), row.when("ChargePeriodEnd")
    if end < start:
        raise row.fail("ChargePeriodEnd", "before ChargePeriodStart")
    category = row.text("ChargeCategory")
    if not category:
        raise row.fail("ChargeCategory", "empty")
    billed, effective, listed = _costs(row, in_usd)
    return LineItem(
        row_key=charge_key(row, start, end),
        focus_version=version,
        provider=row.text("ProviderName")[:100],
        billing_account_id=row.text("BillingAccountId")[:200],
        sub_account_id=row.text("SubAccountId")[:200],
        region_id=row.text("RegionId")[:64],
        resource_id=row.text("ResourceId")[:500],
        resource_tail=resource_tail(row.text("ResourceId"))[:500],
        sku=" ".join(row.text(c) for c in ("SkuId", "ChargeDescription") if row.text(c))[:300],
        charge_category=category[:32],
        commitment_status=row.text("CommitmentDiscountStatus")[:16],
        charge_period_start=start,
        charge_period_end=end,
        currency="USD" if in_usd else row.text("BillingCurrency"),
        billed_cost=billed,
        effective_cost=effective,
        list_cost=listed,
        gpus_per_unit=gpus,
        gpu_hours=_hours(row, start, end) * gpus if category == "Usage" else 0.0,
        pipeline_tag=(_pipeline_tag(row.tags()) or "")[:63] or None,
    )


Span = tuple[datetime, datetime]


@dataclass
class BillFile:
    """One FOCUS file, read as a stream of GPU line items (:meth:`lines`, as often as
    needed: the import reads it once to check it whole and once to store it). After a
    whole read: its version, rows, GPU lines, and each resource's span of charge
    periods (what an import restates), keyed (provider, billing account, resource)."""

    path: Path
    version: str = ""
    rows: int = 0
    gpu_lines: int = 0
    spans: dict[tuple[str, str, str], Span] = field(default_factory=dict)
    unknown_types: set[str] = field(default_factory=set)  # GPU-family types not in the table

    @property
    def source(self) -> str:
        return str(self.path)

    def lines(self) -> Iterator[LineItem]:
        """Every GPU line item, checked; a BillError at the first bad row."""
        source, self.rows, self.gpu_lines, self.spans = self.source, 0, 0, {}
        self.unknown_types = set()
        try:
            header, rows = open_rows(self.path)
            self.version = focus_version(source, header)
            has_usd = all(column in header for column in USD_COLUMNS.values())
            currency = ""
            for self.rows, cells in enumerate(rows, start=1):
                row = Row(source, self.rows, cells)
                currency = _currency(row, currency, has_usd)
                item = line_item(row, self.version, in_usd=currency != "USD")
                if item is not None:
                    self.gpu_lines += 1
                    self._spread(item)
                    yield item
                elif len(self.unknown_types) < MAX_UNKNOWN:
                    self.unknown_types |= unknown_gpu_types(row.text(c) for c in SKU_TEXT)
        except OSError as exc:
            raise BillError(f"cannot read {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise BillError(f"{source} is not UTF-8 text: {exc.reason}") from None
        except csv.Error as exc:
            raise BillError(f"{source}: not a readable CSV file ({exc})") from None

    def _spread(self, item: LineItem) -> None:
        key = (item.provider, item.billing_account_id, item.resource_id)
        start, end = self.spans.get(key, (item.charge_period_start, item.charge_period_end))
        self.spans[key] = (min(start, item.charge_period_start), max(end, item.charge_period_end))


def _currency(row: Row, currency: str, has_usd: bool) -> str:
    """The row's currency (the file's: one per file), or a BillError."""
    code = row.text("BillingCurrency")
    if not code:
        raise row.fail("BillingCurrency", "empty")
    if currency and code != currency:
        mixed = f"{code} after {currency} in earlier rows: a file mixes currencies"
        raise row.fail("BillingCurrency", f"{mixed}; export one currency per file")
    if code != "USD" and not has_usd:
        how = "in USD (or with Azure's x_EffectiveCostInUsd and x_BilledCostInUsd columns)"
        raise row.fail(
            "BillingCurrency", f"{code}: Cadence's figures are USD; export the bill {how}"
        )
    return code
