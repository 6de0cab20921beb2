"""The weekly review (Monday morning) and its CSV and JSON exports.

The router parses the week and the team, asks ``app.review.service`` for the sums
and ``app.review.lines`` for the lines; the three answers (page, CSV, JSON) show the
same lines.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from cadence_client.spreadsheet import cell_from_text
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, visible_pipelines
from app.db.engine import status_thresholds_of
from app.deps import DatabaseDep, Viewer
from app.exceptions import Invalid
from app.planning.causes import BADPUT_CAUSES, CAUSE_LABELS
from app.planning.weekly import iso_week, last_complete_week, monday_of, week_monday
from app.review.lines import (
    EXPORT_CONVENTIONS,
    EXPORT_FIELDS,
    ReviewLine,
    export_row,
    week_in_one_line,
)
from app.review.service import Action, ReviewData, load_review, top_actions
from app.schemas_common import EARLIEST, RANGE_REASON
from app.templating import templates
from app.web.figures_trend import review_trend_figure

router = APIRouter(include_in_schema=False)
WeekQuery = Annotated[str | None, Query(max_length=10)]
TeamQuery = Annotated[str | None, Query(max_length=200)]
REVIEW_PAGE = 100  # lines a page; the export has them all


@dataclass(frozen=True)
class Review:
    week: str
    monday: date
    in_progress: bool
    team: str | None
    data: ReviewData
    lines: list[ReviewLine]
    total: ReviewLine


def chosen_week(week: str | None, today: date) -> date:
    """The Monday of ``week``; by default the last complete week. A week after the
    current one is refused: there is nothing to review yet."""
    if week is None:
        return last_complete_week(today)
    try:
        monday = week_monday(week)
    except ValueError as exc:
        raise Invalid(
            str(exc), fields=[{"field": "week", "reason": "expected e.g. 2026-W45"}]
        ) from exc
    # The page also links the week before and queries that week's runs.
    if monday.isocalendar().year < EARLIEST.year:
        raise Invalid(
            f"week: {week} {RANGE_REASON}", fields=[{"field": "week", "reason": RANGE_REASON}]
        )
    if monday > monday_of(today):
        current = iso_week(today)
        raise Invalid(
            f"{week} has not started yet; the latest week is {current}",
            fields=[{"field": "week", "reason": f"in the future (latest: {current})"}],
        )
    return monday


def build(session: Session, viewer: TokenInfo | None, week: str | None, team: str | None) -> Review:
    today = datetime.now(UTC).date()
    monday = chosen_week(week, today)
    data = load_review(session, visible_pipelines(viewer), monday, team or None)
    return Review(
        iso_week(monday),
        monday,
        monday == monday_of(today),
        team or None,
        data,
        data.lines,
        data.total,
    )


@router.get("/review", response_class=HTMLResponse)
def weekly_review(
    request: Request,
    db: DatabaseDep,
    viewer: Viewer,
    week: WeekQuery = None,
    team: TeamQuery = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    """Every pipeline the viewer may see, largest waste first, REVIEW_PAGE lines a page;
    the totals, the trend and the top actions are over all of them."""
    with db.read() as session:
        review = build(session, viewer, week, team)
        actions: list[Action] = top_actions(session, review.lines)
        tolerance = status_thresholds_of(session).risk_tolerance
    monday = review.monday
    following = monday + timedelta(weeks=1)
    latest = monday_of(datetime.now(UTC).date())
    weeks = review.data.trend
    pages = max(1, -(-len(review.lines) // REVIEW_PAGE))
    page = min(page, pages)
    shown = review.lines[(page - 1) * REVIEW_PAGE : page * REVIEW_PAGE]
    return templates.TemplateResponse(
        request,
        "review.html",
        {
            "r": review,
            "week": review.week,
            "monday": monday,
            "actions": actions,
            "shown": shown,
            "page": page,
            "pages": pages,
            "size": REVIEW_PAGE,
            "sunday": monday + timedelta(days=6),
            "today": datetime.now(UTC).date(),
            "causes": [(c, CAUSE_LABELS[c]) for c in BADPUT_CAUSES],
            "summary": week_in_one_line(review.total, iso_week(monday - timedelta(weeks=1))),
            "previous": iso_week(monday - timedelta(weeks=1)),
            "next": iso_week(following) if following <= latest else None,
            "trend": review_trend_figure(weeks) if any(w.runs for w in weeks) else None,
            "export_query": {k: v for k, v in (("week", review.week), ("team", team)) if v},
            "risk_tolerance": tolerance,
        },
    )


def exported(
    db: DatabaseDep, viewer: Viewer, week: WeekQuery = None, team: TeamQuery = None
) -> Review:
    """The review the exports are made from (the page's)."""
    with db.read() as session:
        return build(session, viewer, week, team)


def exported_with_actions(
    db: DatabaseDep, viewer: Viewer, week: WeekQuery = None, team: TeamQuery = None
) -> tuple[Review, list[Action]]:
    """The review and its top actions (the page's), for the JSON export."""
    with db.read() as session:
        review = build(session, viewer, week, team)
        return review, top_actions(session, review.lines)


Exported = Annotated[Review, Depends(exported)]
ExportedWithActions = Annotated[tuple[Review, list[Action]], Depends(exported_with_actions)]


def export_rows(review: Review) -> list[dict[str, Any]]:
    """The export's rows: one per pipeline in impact order, then the totals; made once
    per review and kept with it (a remembered review is reused while nothing changed)."""
    made = review.data.made
    if "rows" not in made:
        rows = [export_row(line, review.monday) for line in review.lines]
        made["rows"] = [*rows, export_row(review.total, review.monday)]
    found: list[dict[str, Any]] = made["rows"]
    return found


@router.get("/review.json")
def review_json(found: ExportedWithActions) -> JSONResponse:
    """The week's summary line and top actions (the page's), the columns' sign
    convention, then a row per pipeline (impact order) and the totals row (``pipeline``
    = TOTAL)."""
    review, actions = found
    rows = export_rows(review)
    previous = iso_week(review.monday - timedelta(weeks=1))
    return JSONResponse(
        {
            "week": rows[-1]["week"],
            "timezone": "UTC",
            "summary": week_in_one_line(review.total, previous),
            "top_actions": [action_row(a) for a in actions],
            "conventions": EXPORT_CONVENTIONS,
            "rows": rows,
        }
    )


def action_row(a: Action) -> dict[str, Any]:
    """One top action as the JSON export has it (the page's words and dollars)."""
    return {
        "pipeline": a.pipeline.name,
        "label": a.label,
        "remedy": a.remedy,
        "usd_per_month": round(a.usd_per_month, 2),
        "saving_usd_per_month": round(a.saving_usd_per_month, 2),
    }


@router.get("/review.csv")
def review_csv(review: Exported) -> Response:
    rows = export_rows(review)
    text = review.data.made.get("csv")
    if text is None:
        text = review.data.made["csv"] = csv_text(rows)
    filename = f"cadence-review-{rows[-1]['week']}.csv"
    return Response(
        text,
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def csv_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(EXPORT_FIELDS)
    # Lists in EXPORT_FIELDS order, not DictWriter: a third faster on 5,000 rows.
    writer.writerows(
        [cell_from_text(v) if isinstance(v, str) else v for v in (row[f] for f in EXPORT_FIELDS)]
        for row in rows
    )
    return out.getvalue()
