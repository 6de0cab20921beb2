"""Import cloud bills and reconcile them with the runs: the numbers come from
app/planning/reconcile.py, the rows from the repository."""

from __future__ import annotations

import csv
import io
import itertools
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from cadence_client.spreadsheet import cell_from_text
from sqlalchemy.orm import Session

from app.billing import repository
from app.billing.reader import BillFile
from app.billing.schemas import (
    FiguresOut,
    OrgReconciliationOut,
    PipelineFiguresOut,
    ReconciliationOut,
)
from app.db.bill_marks import lock_totals
from app.db.engine import WriteSession
from app.db.kept import KeptMap
from app.exceptions import Invalid
from app.pipelines import service as pipelines
from app.planning.reconcile import (
    BillLine,
    Figures,
    Holding,
    Reconciliation,
    Recorded,
    over_explained,
    reconcile,
    recorded_gpu_hours,
)

MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
CSV_COLUMNS = (
    "month",
    "pipeline",
    "billed_usd",
    "explained_usd",
    "unexplained_usd",
    "billed_gpu_hours",
    "explained_gpu_hours",
    "effective_price_per_gpu_hour",
    "explained_share",
    "lines",
)
UNATTRIBUTED = "(unattributed)"
Out = TypeVar("Out", bound=FiguresOut)
Reconciled = tuple[Reconciliation, dict[str, float]]
EMPTY: Reconciled = (Reconciliation(), {})
# Reconciliations from the lines by (month, pipeline asked for) while the runs' and the
# bill's stamp is as read.
KEPT_BILLS: KeptMap[tuple[str, str | None], Reconciled] = KeptMap("bill_months")


@dataclass(frozen=True)
class Imported:
    source: str
    version: str
    rows: int
    gpu_lines: int
    stored: repository.Stored
    warnings: list[str]

    def sentence(self) -> str:
        s = self.stored
        rows = f"{self.rows} row" + ("" if self.rows == 1 else "s")
        said = (
            f"{self.source}: FOCUS {self.version}, {rows}, {self.gpu_lines} GPU line "
            f"items, {s.new} new, {s.same} already stored"
        )
        if s.changed:
            said += f", {s.changed} stored with other figures (replaced by this file's)"
        if s.replaced:
            said += (
                f"; {s.replaced} lines of earlier imports for the same resources and "
                "periods (another export or granularity) replaced by this file's"
            )
        return "\n".join([said, *(f"warning: {w}" for w in self.warnings)])


def import_bill(session: WriteSession, bill: BillFile) -> Imported:
    """Store a bill, read again from its file (the caller has read it whole once: it
    is known good), in the caller's transaction: each charge once, the lines of earlier
    imports it restates replaced, then the totals of every month it touches kept."""
    repository.lock_imports(session)
    import_id, stored = uuid.uuid4().hex, repository.Stored()
    lines = bill.lines()
    while chunk := list(itertools.islice(lines, repository.CHUNK)):
        repository.store_chunk(session, import_id, bill.source, chunk, stored)
    stored.replaced = repository.replace_restated(session, import_id, bill.spans)
    warnings: list[str] = []
    lock_totals(session)  # from before the runs are read until the totals are committed
    for month in _months(bill.spans.values()):
        warnings += keep_month(session, month_text(month))
    return Imported(bill.source, bill.version, bill.rows, bill.gpu_lines, stored, warnings)


def _months(spans: Iterable[tuple[datetime, datetime]]) -> list[datetime]:
    """The months (their first instant, UTC) any of these spans reaches into."""
    months: set[datetime] = set()
    for start, end in spans:
        at = datetime(start.year, start.month, 1, tzinfo=UTC)
        months.add(at)
        while (at := month_bounds(month_text(at))[1]) < end:
            months.add(at)
    return sorted(months)


def keep_month(session: WriteSession, month: str) -> list[str]:
    """Reconcile the month from its lines and keep its totals; its warnings."""
    result, recorded = live_reconciliation(session, month)
    repository.keep_totals(session, month_bounds(month)[0].date(), result, recorded)
    return over_explained(result.pipelines, recorded, month)


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """``2026-11`` -> [Nov 1, Dec 1) in UTC; a 422 naming ``month`` otherwise."""
    match = MONTH.match(month)
    if match is None:
        raise Invalid(
            f"month {month[:20]!r}: expected YYYY-MM, e.g. 2026-11",
            fields=[{"field": "month", "reason": "expected YYYY-MM"}],
        )
    year, number = int(match.group(1)), int(match.group(2))
    start = datetime(year, number, 1, tzinfo=UTC)
    return start, datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)


def default_month(session: Session) -> str:
    """The month of the newest bill line, else the current month."""
    return month_text(repository.latest_line_start(session) or datetime.now(UTC))


def month_text(at: datetime) -> str:
    return f"{at.year:04d}-{at.month:02d}"


def _resources(tag: object) -> list[str]:
    parts = (p.strip() for p in str(tag or "").split(","))
    return list(dict.fromkeys(p for p in parts if p))


def month_reconciliation(
    session: Session, month: str, only: str | None = None
) -> tuple[Reconciliation, dict[str, float]]:
    """Every pipeline's figures for the month and the GPU-hours its runs recorded: those
    kept at import while no run of the month moved since (app/db/bill_marks.py), else
    reconciled from the lines (:func:`live_reconciliation`), once per process while the
    runs and the bill stay as they are (a bill of this month, imported daily while runs
    keep arriving, would otherwise be reconciled on every request until the next
    import)."""
    found, key = repository.kept_totals(session, month_bounds(month)[0].date(), only)
    if found is not None:
        return found
    return KEPT_BILLS.get(
        session, ((month, only), key), partial(live_reconciliation, session, month, only)
    )


def live_reconciliation(
    session: Session, month: str, only: str | None = None
) -> tuple[Reconciliation, dict[str, float]]:
    """:func:`month_reconciliation` from the lines; with ``only``, read just the lines
    that pipeline's figures depend on (those of the resources its runs named, or tagged
    for it): its figures are the same, the others are partial."""
    start, end = month_bounds(month)
    held = repository.holdings_between(session, start, end)
    holdings = [
        Holding(row.name, resource, row.started_at, row.finished_at)
        for row in held
        for resource in _resources(row.resources)
    ]
    runs = [Recorded(r.name, r.started_at, r.finished_at, r.gpu_hours or 0.0) for r in held]
    resources = None if only is None else [h.resource_id for h in holdings if h.pipeline == only]
    lines = (  # a stream: reconcile goes through the lines once
        BillLine(
            start=line.charge_period_start,
            end=line.charge_period_end,
            cost=line.effective_cost,
            gpu_hours=line.gpu_hours,
            resource_id=line.resource_id,
            pipeline_tag=line.pipeline_tag,
        )
        for line in repository.lines_between(
            session, start, end, resources=resources, pipeline=only
        )
    )
    return reconcile(lines, holdings, start, end), recorded_gpu_hours(runs, start, end)


def figures_out(kind: type[Out], f: Figures, **extra: object) -> Out:
    """A Figures as its schema (``extra``: the schema's other fields)."""
    return kind.model_validate(
        {
            **extra,
            "billed_usd": round(f.billed_usd, 6),
            "explained_usd": round(f.explained_usd, 6),
            "unexplained_usd": round(f.unexplained_usd, 6),
            "billed_gpu_hours": round(f.billed_gpu_hours, 6),
            "explained_gpu_hours": round(f.explained_gpu_hours, 6),
            "effective_price_per_gpu_hour": f.effective_price_per_gpu_hour,
            "explained_share": f.explained_share,
            "lines": f.lines,
        }
    )


def pipeline_reconciliation(session: Session, name: str, month: str | None) -> ReconciliationOut:
    """One pipeline's billed, explained and unexplained GPU spend in a month."""
    pipeline = pipelines.get_by_name(session, name)
    billed = True
    if month is None:
        latest = repository.latest_line_start(session)
        billed = latest is not None  # no bill imported at all: nothing more to read
        month = month_text(latest or datetime.now(UTC))
    result, recorded = month_reconciliation(session, month, only=name) if billed else EMPTY
    figures = result.of(name)
    return figures_out(
        ReconciliationOut,
        figures,
        pipeline=name,
        month=month,
        recorded_price_per_gpu_hour=pipeline.price_per_gpu_hour,
        warnings=over_explained({name: figures}, recorded, month),
    )


def org_reconciliation(
    session: Session, month: str | None, visible: Sequence[str] | None = None
) -> OrgReconciliationOut:
    """Every pipeline's figures for a month, the unattributed lines and the total. A
    token limited to some pipelines sees only theirs (no total, no unattributed)."""
    month = month or default_month(session)
    result, recorded = month_reconciliation(session, month)
    names = sorted(n for n in result.pipelines if visible is None or n in visible)
    rows = [figures_out(PipelineFiguresOut, result.pipelines[n], pipeline=n) for n in names]
    hidden = visible is not None
    return OrgReconciliationOut(
        month=month,
        total=figures_out(FiguresOut, Figures() if hidden else result.total()),
        unattributed=figures_out(FiguresOut, Figures() if hidden else result.unattributed),
        pipelines=rows,
        warnings=over_explained({n: result.pipelines[n] for n in names}, recorded, month),
    )


def overview_reconciliation(
    session: Session, visible: Sequence[str] | None = None
) -> OrgReconciliationOut | None:
    """The overview's bill line: the newest billed month, or None when no bill has been
    imported (then nothing is read: the runs' held resources of a month are ~100,000
    rows at 10M runs, 1.4 s of every overview for a line that is not shown)."""
    if repository.latest_line_start(session) is None:
        return None
    return org_reconciliation(session, None, visible)


def _cell(value: object) -> str:
    return "" if value is None else cell_from_text(str(value))


def org_csv(answer: OrgReconciliationOut) -> str:
    """The same figures as CSV: one row per pipeline, then unattributed and the total."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    named = [(p.pipeline, p) for p in answer.pipelines]
    extra = [(UNATTRIBUTED, answer.unattributed), ("(total)", answer.total)]
    for name, figures in [*named, *extra]:
        values = figures.model_dump()
        writer.writerow(
            [_cell(answer.month), _cell(name)] + [_cell(values[c]) for c in CSV_COLUMNS[2:]]
        )
    return out.getvalue()
