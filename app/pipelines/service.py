"""Reading and configuring pipelines."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from app.auth.service import TokenInfo
from app.db.base import utcnow
from app.db.engine import WriteSession
from app.db.memo import per_session
from app.db.models import Pipeline
from app.exceptions import Invalid, NotFound, RateLimited
from app.pipelines import repository
from app.pipelines.schemas import PipelineList, PipelineOut, PipelineUpdate
from app.settings import Settings

# Settings a PUT may clear with null (the rest keep their value when null is sent).
NULLABLE = ("monthly_budget_usd", "quality_value_usd_per_unit_month")


@per_session
def get_by_name(session: Session, name: str) -> Pipeline:
    row = repository.by_name(session, name)
    if row is None:
        raise NotFound(
            f"no pipeline named {name!r}; pipelines are created by their first run "
            "(POST /api/v1/runs) or by PUT /api/v1/pipelines/{name}"
        )
    return row


def to_out(row: Pipeline, stats: tuple[int, datetime | None] = (0, None)) -> PipelineOut:
    out = PipelineOut.model_validate(row)
    out.run_count, last = stats
    if last is not None and last.tzinfo is None:  # SQLite aggregates lose the column type
        last = datetime.fromisoformat(str(last)).replace(tzinfo=UTC)
    out.last_run_at = last
    return out


def list_page(
    session: Session, *, only: Sequence[str] | None, cursor: str | None, limit: int
) -> PipelineList:
    """One page of pipelines by name (``only``: a token's pipeline limit), with the total
    and the cursor of the next page (None on the last)."""
    after = decode_name_cursor(cursor) if cursor else None
    rows = repository.page_after(session, only, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return PipelineList(
        pipelines=[to_out(p, (n, last)) for p, n, last in rows],
        total=repository.count(session, only=only),
        next_cursor=encode_name_cursor(rows[-1][0].name) if more else None,
    )


def encode_name_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def decode_name_cursor(cursor: str) -> str:
    try:
        padded = (cursor + "=" * (-len(cursor) % 4)).encode()
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (ValueError, binascii.Error) as exc:
        raise Invalid(
            "cursor is not one this server issued",
            fields=[{"field": "cursor", "reason": "malformed; pass next_cursor back unchanged"}],
        ) from exc


def describe(session: Session, name: str) -> PipelineOut:
    row = get_by_name(session, name)
    return to_out(row, repository.run_stats(session, [row.id]).get(row.id, (0, None)))


def upsert(
    session: WriteSession,
    name: str,
    update: PipelineUpdate,
    settings: Settings,
    token: TokenInfo | None = None,
) -> Pipeline:
    row = repository.by_name(session, name)
    if row is None:
        check_creation(session, [name], token, settings, field="name")
        row = Pipeline(
            created_by_token_id=token.id if token is not None else None,
            name=name,
            display_name=name,
            owner="",
            price_per_gpu_hour=settings.default_price_per_gpu_hour,
            runs_per_week=1.0,
            quality_metric="quality",
            higher_is_better=True,
        )
        session.add(row)
    for field, value in update.model_dump(exclude_unset=True).items():
        if value is None and field not in NULLABLE:
            continue
        setattr(row, field, value)
    session.flush()
    return row


def count(session: Session, *, only: Sequence[str] | None = None) -> int:
    """How many pipelines there are (of those named in ``only``, a token's limit)."""
    return repository.count(session, only=only)


def page(
    session: Session,
    *,
    only: Sequence[str] | None = None,
    owner: str | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[Pipeline]:
    """Pipelines in name order (the overview and the weekly review list them);
    ``owner``: only this team's."""
    return repository.by_names(session, offset=offset, limit=limit, only=only, owner=owner)


class Brief(NamedTuple):
    """What org-wide pages need of a pipeline, read as plain rows: loading 5,000 ORM
    ``Pipeline`` objects cost ~0.2 s of the portfolio's time, these ~10 ms. A named
    tuple, built and compared in C: 0.6 us a row against a frozen dataclass's 2.8, and
    the org-wide answers' keys, which hold every brief, compare 5,000 in 0.4 ms, not 2.6."""

    id: int
    name: str
    display_name: str
    owner: str
    monthly_budget_usd: float | None
    price_per_gpu_hour: float
    production_variant: str
    runs_per_week: float
    quality_metric: str
    higher_is_better: bool
    gate_cost_basis: str
    gate_power: float
    quality_value_usd_per_unit_month: float | None
    variant_descriptions: dict[str, str] | None
    quality_margin: float


BRIEF_FIELDS = Brief._fields


def briefs(
    session: Session, *, only: Sequence[str] | None = None, owner: str | None = None
) -> list[Brief]:
    """Every pipeline (of ``only``, a token's limit; of ``owner``'s team), in name order."""
    rows = repository.briefs(session, only=only, owner=owner)
    # By position: building each from row._mapping cost 25 us a row (0.12 s for 5,000).
    if rows and tuple(rows[0]._fields) != BRIEF_FIELDS:
        raise RuntimeError(f"pipeline brief columns {rows[0]._fields} != {BRIEF_FIELDS}")
    return [Brief._make(row) for row in rows]


def settings_key(p: Pipeline) -> tuple[Any, ...]:
    """Every stored setting of the pipeline, to key values computed from them."""
    return tuple(getattr(p, c.key) for c in Pipeline.__table__.columns)


def teams(session: Session, *, only: Sequence[str] | None = None) -> list[str]:
    """The teams (owners) of the pipelines in ``only`` (every pipeline: None), sorted."""
    return repository.owners(session, only=only)


CREATION_WINDOW = timedelta(hours=1)


def check_creation(
    session: Session,
    names: Sequence[str],
    token: TokenInfo | None,
    settings: Settings,
    *,
    field: str,
) -> None:
    """Refuse creating these pipelines beyond the token's hourly allowance.

    ``CADENCE_PIPELINE_CREATE_PER_HOUR`` pipelines per token in any sliding hour, counted
    from ``pipeline.created_by_token_id`` (so every worker sees the same count). Asked
    only when a pipeline is missing: ingesting into existing pipelines pays nothing.
    Two racing requests may both pass the count; the overshoot is bounded by them.
    """
    limit = settings.pipeline_create_per_hour
    if token is None or limit == 0 or not names:
        return
    if len(names) > limit:
        raise Invalid(
            f"this request would create {len(names)} pipelines; one token may create at most "
            f"{limit} per hour (CADENCE_PIPELINE_CREATE_PER_HOUR)",
            fields=[{"field": field, "reason": f"more than {limit} new pipelines"}],
        )
    now = utcnow()
    recent = repository.created_by_token_since(session, token.id, now - CREATION_WINDOW)
    excess = len(recent) + len(names) - limit
    if excess > 0:
        wait = retry_after_seconds(recent, excess, now)
        raise RateLimited(
            f"token {token.name!r} has created {len(recent)} pipeline(s) in the last hour and "
            f"may create at most {limit} per hour (CADENCE_PIPELINE_CREATE_PER_HOUR); "
            f"retry in {wait} s, or report runs to existing pipelines",
            retry_after=wait,
        )


@dataclass(frozen=True, slots=True)
class PipelineRef:
    """What ingestion needs of a pipeline (a plain row, not an ORM object: cheaper)."""

    id: int
    name: str
    price_per_gpu_hour: float
    quality_metric: str


@dataclass(frozen=True, slots=True)
class Named:
    """A pipeline as an ingest request names it: where (the field of its first run, for
    errors) and the quality metric a new pipeline takes."""

    field: str
    quality_metric: str


def for_ingest(
    session: WriteSession, named: Mapping[str, Named], token: TokenInfo | None, settings: Settings
) -> dict[str, PipelineRef]:
    """The pipelines an ingest names, by name, creating the missing ones where allowed.

    Round trips: one look-up; for missing pipelines, the creation check, one insert that
    skips names a racing request created, and one look-up of what was inserted.
    """
    names = sorted(named)
    found = {row.name: PipelineRef(*row) for row in repository.refs(session, names)}
    missing = [n for n in names if n not in found]
    if missing:
        _may_create(session, missing, named, token, settings)
        repository.insert_new(
            session, [_new_pipeline(n, named[n], token, settings) for n in missing]
        )
        found.update({row.name: PipelineRef(*row) for row in repository.refs(session, missing)})
    return found


def _may_create(
    session: Session,
    missing: list[str],
    named: Mapping[str, Named],
    token: TokenInfo | None,
    settings: Settings,
) -> None:
    """Ingest creates unknown pipelines only when allowed, and within the token's rate."""
    if not settings.auto_create_pipelines:
        shown = ", ".join(repr(n) for n in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise Invalid(
            f"no pipeline named {shown}, and ingest does not create pipelines "
            "(CADENCE_AUTO_CREATE_PIPELINES=false): an admin creates one with "
            "PUT /api/v1/pipelines/{name}",
            fields=[{"field": named[n].field, "reason": "no such pipeline"} for n in missing],
        )
    check_creation(session, missing, token, settings, field=named[missing[0]].field)


def _new_pipeline(
    name: str, named: Named, token: TokenInfo | None, settings: Settings
) -> dict[str, Any]:
    return {
        "name": name,
        "display_name": name,
        "owner": "",
        "price_per_gpu_hour": settings.default_price_per_gpu_hour,
        "monthly_budget_usd": None,
        "runs_per_week": 1.0,
        "quality_metric": named.quality_metric,
        "higher_is_better": True,
        "created_by_token_id": token.id if token is not None else None,
    }


def retry_after_seconds(created: Sequence[datetime], excess: int, now: datetime) -> int:
    """Seconds until ``excess`` of these creations (oldest first) leave the hour window."""
    frees_at = created[excess - 1] + CREATION_WINDOW
    return max(1, math.ceil((frees_at - now).total_seconds()))


@dataclass(frozen=True)
class ChangePoint:
    """A change point of the cost series: ``at`` (UTC), what it was, who said so, and its
    kind ("declared", with the note's id, or "price")."""

    at: datetime
    description: str
    kind: str
    by: str
    id: int | None = None


def change_points(session: Session, pipeline: Pipeline) -> list[ChangePoint]:
    """The declared notes and the price changes of a pipeline, oldest first."""
    points = [
        ChangePoint(r.at, r.description, r.kind, r.by, r.id)
        for r in repository.change_rows(session, pipeline.id)
    ]
    return sorted(points, key=lambda p: (p.at, p.kind, p.id or 0))
