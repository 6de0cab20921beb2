"""Import cloud bills and reconcile them with the runs: the numbers come from
app/planning/reconcile.py, the rows from the repository."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from cadence_client.spreadsheet import cell_from_text
from sqlalchemy.orm import Session

from app.billing import repository
from app.billing.reader import Bill
from app.billing.schemas import (
    FiguresOut,
    OrgReconciliationOut,
    PipelineFiguresOut,
    ReconciliationOut,
)
from app.db.engine import WriteSession
from app.exceptions import Invalid
from app.pipelines import service as pipelines
from app.planning.reconcile import BillLine, Figures, Holding, Reconciliation, reconcile

MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
CSV_COLUMNS = (
    "month", "pipeline", "billed_usd", "explained_usd", "unexplained_usd",
    "billed_gpu_hours", "explained_gpu_hours", "effective_price_per_gpu_hour",
    "explained_share", "lines",
)  # fmt: skip
UNATTRIBUTED = "(unattributed)"
Out = TypeVar("Out", bound=FiguresOut)


@dataclass(frozen=True)
class Imported:
    source: str
    version: str
    rows: int
    gpu_lines: int
    created: int

    def sentence(self) -> str:
        rows = f"{self.rows} row" + ("" if self.rows == 1 else "s")
        return (f"{self.source}: FOCUS {self.version}, {rows}, {self.gpu_lines} GPU line "
                f"items, {self.created} new, {self.gpu_lines - self.created} already "
                "stored")  # fmt: skip


def import_bill(session: WriteSession, bill: Bill) -> Imported:
    """Store a read bill's GPU lines (those not stored yet)."""
    created = repository.store_lines(session, bill.source, bill.lines)
    return Imported(bill.source, bill.version, bill.rows, len(bill.lines), created)


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


def month_reconciliation(session: Session, month: str, only: str | None = None) -> Reconciliation:
    """Every pipeline's figures for the month; with ``only``, read just the lines that
    pipeline's figures depend on (those of the resources its runs named, or tagged for
    it): its figures are the same, the others are partial."""
    start, end = month_bounds(month)
    holdings = [
        Holding(row.name, resource, row.started_at, row.finished_at)
        for row in repository.holdings_between(session, start, end)
        for resource in _resources(row.resources)
    ]
    resources = None if only is None else [h.resource_id for h in holdings if h.pipeline == only]
    lines = [
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
    ]
    return reconcile(lines, holdings, start, end)


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
    figures = month_reconciliation(session, month, only=name).of(name) if billed else Figures()
    return figures_out(
        ReconciliationOut,
        figures,
        pipeline=name,
        month=month,
        recorded_price_per_gpu_hour=pipeline.price_per_gpu_hour,
    )


def org_reconciliation(
    session: Session, month: str | None, visible: Sequence[str] | None = None
) -> OrgReconciliationOut:
    """Every pipeline's figures for a month, the unattributed lines and the total. A
    token limited to some pipelines sees only theirs (no total, no unattributed)."""
    month = month or default_month(session)
    result = month_reconciliation(session, month)
    names = sorted(n for n in result.pipelines if visible is None or n in visible)
    rows = [figures_out(PipelineFiguresOut, result.pipelines[n], pipeline=n) for n in names]
    hidden = visible is not None
    return OrgReconciliationOut(
        month=month,
        total=figures_out(FiguresOut, Figures() if hidden else result.total()),
        unattributed=figures_out(FiguresOut, Figures() if hidden else result.unattributed),
        pipelines=rows,
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
