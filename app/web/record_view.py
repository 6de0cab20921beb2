"""The forecast's record on the pipeline page and the portfolio: a chart and a sentence
(``templates/_record.html``), from ``app.analytics.record``; reads nothing when kept."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import record
from app.db.models import Pipeline
from app.planning.record import org_sentence, record_sentence, summarise
from app.web.figures_base import has_data
from app.web.figures_record import record_figure

PAGE_MONTHS = 12
EMPTY = (
    "The forecast's record appears here once a month has closed since this pipeline's "
    "first runs: each month's forecast is kept at its start and scored against the bill "
    "when the month ends."
)


@dataclass(frozen=True)
class RecordSection:
    figure: dict[str, Any] | None
    sentence: str | None
    empty: str | None
    backtested: bool  # some month was backtested (the note says how)


def record_section(session: Session, pipeline: Pipeline) -> RecordSection:
    """The last PAGE_MONTHS closed months: the chart and the sentence, or the empty state."""
    months = record.pipeline_record(session, pipeline).last(PAGE_MONTHS)
    figure = record_figure(months)
    if not months or not has_data(figure):
        return RecordSection(None, None, EMPTY, False)
    backtested = any(m.forecast.source == "backtest" for m in months)
    return RecordSection(figure, record_sentence(summarise(months)), None, backtested)


def org_record_sentence(session: Session, names: Collection[str]) -> str:
    """The portfolio's sentence over the pipelines ``names``, from the stored forecasts."""
    return org_sentence(record.org_record(session, names))
