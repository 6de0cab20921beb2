"""Pipeline settings with an audit trail: every change (who, when, old, new) is a row of
``pipeline_change``, written in the same transaction as the change itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.auth.service import TokenInfo
from app.db.engine import WriteSession
from app.db.models import Pipeline, PipelineChange
from app.pipelines import repository
from app.pipelines.schemas import PipelineUpdate
from app.pipelines.service import upsert
from app.settings import Settings

# The settings people edit, in the order the form shows them, with their labels.
EDITABLE: dict[str, str] = {
    "display_name": "Display name",
    "owner": "Team / owner",
    "monthly_budget_usd": "Monthly budget (USD)",
    "price_per_gpu_hour": "Price per GPU-hour (USD)",
    "runs_per_week": "Current cadence (runs per week)",
    "production_variant": "Production variant",
    "quality_metric": "Quality metric",
    "quality_margin": "Quality margin (how much worse the candidate's quality may be)",
    "variant_descriptions": "Variant descriptions",
}
AUDITED = (
    *EDITABLE,
    "higher_is_better",
    "gate_cost_basis",
    "gate_power",
    "quality_value_usd_per_unit_month",
)
RECENT_CHANGES = 20


@dataclass(frozen=True)
class Change:
    field: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class ChangeRecord:
    at: datetime
    by: str
    field: str
    label: str
    old: str | None
    new: str | None


def shown(value: Any) -> str | None:
    """A setting as the audit trail stores it: None stays None (e.g. no budget), floats
    without a trailing ``.0``, everything else as text."""
    if value is None:
        return None
    if isinstance(value, dict):  # variant descriptions: "baseline: ...; candidate: ..."
        return "; ".join(f"{k}: {v}" for k, v in sorted(value.items())) or None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def snapshot(row: Pipeline) -> dict[str, str | None]:
    return {f: shown(getattr(row, f)) for f in AUDITED}


def diff(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> list[Change]:
    """The settings whose shown value differs, in ``AUDITED`` order."""
    return [
        Change(f, before.get(f), after.get(f)) for f in AUDITED if before.get(f) != after.get(f)
    ]


def apply(
    session: WriteSession,
    name: str,
    update: PipelineUpdate,
    settings: Settings,
    token: TokenInfo | None,
) -> tuple[Pipeline, list[Change]]:
    """``upsert`` plus a ``pipeline_change`` row per changed setting (by the token's name,
    or "cli" without a token). A new pipeline records its initial settings as changes
    from nothing."""
    existing = repository.by_name(session, name)
    before = snapshot(existing) if existing is not None else {}
    row = upsert(session, name, update, settings, token)
    changes = diff(before, snapshot(row))
    who = token.name if token is not None else "cli"
    session.add_all(
        PipelineChange(
            pipeline_id=row.id, changed_by=who, field=c.field, old_value=c.old, new_value=c.new
        )
        for c in changes
    )
    session.flush()
    return row, changes


def record(
    session: WriteSession, pipeline_id: int, who: str, field: str, old: str | None, new: str | None
) -> None:
    """One audited change that is not a setting (an alert rule added, paused, deleted)."""
    session.add(
        PipelineChange(
            pipeline_id=pipeline_id, changed_by=who, field=field, old_value=old, new_value=new
        )
    )
    session.flush()


def recent(session: Session, pipeline_id: int, limit: int = RECENT_CHANGES) -> list[ChangeRecord]:
    """The latest changes, newest first, labelled as the form labels them."""
    return [
        ChangeRecord(
            r.created_at,
            r.changed_by,
            r.field,
            EDITABLE.get(r.field, r.field.replace("_", " ")),
            r.old_value,
            r.new_value,
        )
        for r in repository.recent_changes(session, pipeline_id, limit)
    ]
