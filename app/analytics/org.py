"""What every org-wide answer (the portfolio, the weekly review) is made from, read
together: the visible pipelines, the teams, the kept twelve-week window and the kept
monthly costs. Each is kept between requests while the pipelines' runs are unchanged;
``key`` names them all, so a whole answer made from them can be recalled
(the kept maps ``portfolio`` and ``review``, app/db/kept.py) while the key is equal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from sqlalchemy.orm import Session

from app.analytics import org_weeks
from app.analytics.bill_now import current_monthly_costs
from app.pipelines import service as pipelines


@dataclass(frozen=True)
class OrgInputs:
    pipelines: list[pipelines.Brief]  # in name order
    teams: list[str]
    window: org_weeks.OrgWindow
    costs: dict[int, float]  # the current monthly cost (the expected bill), by pipeline id

    @property
    def key(self) -> tuple[object, ...]:
        """Everything above, cheap to compare: the window by its end and change counts."""
        w = self.window
        return (self.pipelines, self.teams, w.last, w.change_counts, self.costs)


def org_inputs(
    session: Session, only: Sequence[str] | None, team: str | None, last: date
) -> OrgInputs:
    """The inputs for the pipelines ``only`` allows (a token's limit; every one: None), of
    ``team`` when given, with the window ending with ``last``'s week (a Monday)."""
    listed = pipelines.briefs(session, only=only, owner=team)
    teams = pipelines.teams(session, only=only)
    production = {p.id: p.production_variant for p in listed}
    window = org_weeks.org_window(session, list(production), last, production)
    return OrgInputs(listed, teams, window, current_monthly_costs(session, listed))
