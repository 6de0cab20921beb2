"""Evaluations: the serving model's quality at a moment, as pipelines send them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from app.schemas_common import Identifier, OutModel, StrictModel, Timestamp


class EvaluationIn(StrictModel):
    run_id: Annotated[Identifier, Field(min_length=1, max_length=200)] = Field(
        description="The run whose model was serving (its age counts from its finished_at)."
    )
    evaluated_at: Timestamp = Field(description="When the quality was measured.")
    value: float = Field(ge=-1e12, le=1e12, description="The metric's value (finite).")
    metric: Annotated[Identifier, Field(min_length=1, max_length=100)] | None = Field(
        None, description="Defaults to the pipeline's quality_metric; must equal it."
    )


class EvaluationBatchIn(StrictModel):
    evaluations: list[EvaluationIn] = Field(min_length=1)


class EvaluationOut(OutModel):
    id: int
    run_id: str
    evaluated_at: datetime
    metric: str
    value: float
    age_weeks: float = Field(description="evaluated_at - the run's finished_at, in weeks.")
    created_at: datetime


class EvaluationBatchOut(OutModel):
    created: int
    existing: int
    evaluations: list[EvaluationOut]


class EvaluationPage(OutModel):
    evaluations: list[EvaluationOut]
    next_cursor: str | None = Field(description="Pass as `cursor` to get the next page.")
