"""A cloud's FOCUS export (CSV or Parquet; FOCUS 1.0 to 1.2) read as GPU line items.

Everything is checked before anything is stored: a file that is not FOCUS, a version
Cadence cannot read, a currency mix, or a row without a needed value raises
:class:`BillError` naming the file, the row and the column, and the command stores
nothing from it. Rows that name no GPU (storage, network, CPU instances) are counted
and skipped: the reconciliation is about GPU spend.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.exceptions import Invalid
from app.planning.gpu_skus import gpus_per_unit, unknown_gpu_types
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


class BillError(Invalid):
    """A bill Cadence cannot import: the message names the file, row and column."""


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
    gpus_per_unit: int
    gpu_hours: float
    pipeline_tag: str | None


@dataclass(frozen=True)
class Bill:
    source: str
    version: str
    rows: int  # every row read
    lines: list[LineItem]  # the GPU ones
    unknown_types: tuple[str, ...] = ()  # GPU-family instance types the SKU table lacks


def focus_version(source: str, header: list[str]) -> str:
    """The FOCUS version a header is written in, or a BillError saying why not."""
    names = set(header)
    if not names & {"BilledCost", "EffectiveCost", "ChargePeriodStart"}:
        shown = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
        raise BillError(f"{source}: not a FOCUS file (no BilledCost, EffectiveCost or "
                        f"ChargePeriodStart column; found {shown or 'no header'})")  # fmt: skip
    if "ProviderName" not in names:
        later = [n for n in LATER_NAMES if n in names]
        draft = [n for n in DRAFT_NAMES if n in names]
        which = (f"FOCUS 1.3 or later ({', '.join(later)})" if later else
                 f"a FOCUS draft before 1.0 ({', '.join(draft) or 'no ProviderName'})")  # fmt: skip
        raise BillError(f"{source}: {which}: Cadence reads FOCUS 1.0 to 1.2 (column "
                        "ProviderName missing)")  # fmt: skip
    missing = [n for n in NEEDED if n not in names]
    if missing:
        raise BillError(f"{source}: column {', '.join(missing)} missing (needed to reconcile)")
    if any(n in names for n in ADDED_IN_1_2):
        return "1.2"
    return "1.1" if any(n in names for n in ADDED_IN_1_1) else "1.0"


def _text(value: Any) -> str:
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

    def number(self, column: str, *, required: bool = True) -> float | None:
        raw = self.cells.get(column)
        if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
            return float(raw)
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
            raise self.fail(column, f"{text!r} is not a finite number")
        return value

    def when(self, column: str) -> datetime:
        raw = self.cells.get(column)
        if isinstance(raw, datetime):
            return raw.astimezone(UTC) if raw.tzinfo else raw.replace(tzinfo=UTC)
        text = _text(raw)
        if not text:
            raise self.fail(column, "empty; an ISO 8601 timestamp is needed")
        cleaned = text.removesuffix(" UTC").replace("Z", "+00:00")
        try:
            when = datetime.fromisoformat(cleaned)
        except ValueError:
            raise self.fail(column, f"{text[:40]!r} is not an ISO 8601 timestamp") from None
        return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)

    def tags(self) -> dict[str, str]:
        raw = self.cells.get("Tags")
        if isinstance(raw, dict):
            return {str(k): _text(v) for k, v in raw.items()}
        text = raw if isinstance(raw, list) else _text(raw)
        if not text:
            return {}
        try:
            parsed = json.loads(text) if isinstance(text, str) else text
        except json.JSONDecodeError:
            raise self.fail("Tags", "not JSON") from None
        if isinstance(parsed, dict):
            return {str(k): _text(v) for k, v in parsed.items()}
        # Parquet maps arrive as (key, value) pairs, GCP's as [{"key": .., "value": ..}].
        pairs = [(p.get("key"), p.get("value")) if isinstance(p, dict) else p for p in parsed]
        if not isinstance(parsed, list) or any(len(p) != 2 for p in pairs):
            raise self.fail("Tags", "neither a JSON object nor a list of key-value pairs")
        return {str(k): _text(v) for k, v in pairs}


DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]")


def _canonical(value: Any) -> str:
    """One spelling of a cell however the file wrote it (CSV text, Parquet types), so
    the same row in a CSV and in a Parquet download has the same key."""
    if isinstance(value, datetime):
        when = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        return when.isoformat()
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return repr(float(value))
    if isinstance(value, list) and all(isinstance(p, tuple | list) and len(p) == 2 for p in value):
        value = dict(value)  # a Parquet map
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    text = _text(value)
    try:
        return repr(float(text))
    except ValueError:
        pass
    if DATE_LIKE.match(text):
        try:
            return _canonical(
                datetime.fromisoformat(text.removesuffix(" UTC").replace("Z", "+00:00"))
            )
        except ValueError:
            return text
    if text[:1] == "{":
        try:
            return _canonical(json.loads(text))
        except json.JSONDecodeError:
            return text
    return text


def row_key(cells: Mapping[str, Any]) -> str:
    """The bill's own identity of a row: a hash of its FOCUS (non-``x_``) cells that are
    not empty, each in one spelling (:func:`_canonical`), so the same row read again,
    from the same file, a re-download or its Parquet twin, is the same key."""
    parts = sorted((k, _canonical(v)) for k, v in cells.items() if not k.startswith("x_"))
    kept = [(k, v) for k, v in parts if v not in ("", "{}", "[]", "nan")]
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()


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
            value = row.number(quantity, required=False)
            if value is not None:
                return value
    return (end - start).total_seconds() / 3600.0


def line_item(row: Row, version: str, in_usd: bool = False) -> LineItem | None:
    """The row as a GPU line item, None when it names no GPU. ``in_usd``: the costs
    from Azure's ``x_...InUsd`` columns (the bill is in another currency)."""
    gpus = gpus_per_unit(row.text(c) for c in SKU_TEXT)
    if gpus is None:
        return None
    start, end = row.when("ChargePeriodStart"), row.when("ChargePeriodEnd")
    if end < start:
        raise row.fail("ChargePeriodEnd", "before ChargePeriodStart")
    category = row.text("ChargeCategory")
    if not category:
        raise row.fail("ChargeCategory", "empty")
    usage = category == "Usage"
    return LineItem(
        row_key=row_key(row.cells),
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
        billed_cost=row.number(USD_COLUMNS["BilledCost"] if in_usd else "BilledCost") or 0.0,
        effective_cost=row.number(USD_COLUMNS["EffectiveCost"] if in_usd else "EffectiveCost")
        or 0.0,
        list_cost=None if in_usd else row.number("ListCost", required=False),
        gpus_per_unit=gpus,
        gpu_hours=_hours(row, start, end) * gpus if usage else 0.0,
        pipeline_tag=(_pipeline_tag(row.tags()) or "")[:63] or None,
    )


def _csv_rows(path: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    handle = path.open(encoding="utf-8-sig", newline="")
    reader = csv.DictReader(handle)
    header = list(reader.fieldnames or [])

    def rows() -> Iterator[dict[str, Any]]:
        with handle:
            yield from reader

    return header, rows()


def _parquet_rows(path: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BillError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's errors have no common base worth naming
        raise BillError(f"{path}: not a readable Parquet file ({exc})") from None
    return list(table.column_names), iter(table.to_pylist())


def read_bill(path: Path) -> Bill:
    """Every GPU line item of one FOCUS file, or a BillError (nothing half-read)."""
    source = str(path)
    try:
        is_parquet = path.suffix.lower() in (".parquet", ".pq")
        header, rows = (_parquet_rows if is_parquet else _csv_rows)(path)
        version = focus_version(source, header)
        lines: list[LineItem] = []
        unknown: set[str] = set()
        currency, count = "", 0
        has_usd = all(column in header for column in USD_COLUMNS.values())
        for count, cells in enumerate(rows, start=1):
            row = Row(source, count, cells)
            code = row.text("BillingCurrency")
            if not code:
                raise row.fail("BillingCurrency", "empty")
            currency = currency or code
            if code != currency:
                raise row.fail("BillingCurrency", f"{code} after {currency} in earlier rows: "
                               "a file mixes currencies; export one currency per file")  # fmt: skip
            if code != "USD" and not has_usd:
                raise row.fail("BillingCurrency", f"{code}: Cadence's figures are USD; export "
                               "the bill in USD (or with Azure's x_EffectiveCostInUsd and "
                               "x_BilledCostInUsd columns)")  # fmt: skip
            item = line_item(row, version, in_usd=code != "USD")
            if item is not None:
                lines.append(item)
            elif len(unknown) < MAX_UNKNOWN:
                unknown |= unknown_gpu_types(row.text(c) for c in SKU_TEXT)
    except OSError as exc:
        raise BillError(f"cannot read {source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BillError(f"{source} is not UTF-8 text: {exc.reason}") from None
    except csv.Error as exc:
        raise BillError(f"{source}: not a readable CSV file ({exc})") from None
    return Bill(source, version, count, lines, tuple(sorted(unknown)))
