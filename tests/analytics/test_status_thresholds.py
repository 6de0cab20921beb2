"""The budget words' thresholds are settings (CADENCE_STATUS_LIKELY_OVER, _AT_RISK),
carried by the Database to the one place a status is computed (app/analytics/month.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.db.engine import Database, make_database, status_thresholds_of
from app.planning.budget_status import BudgetStatus, StatusThresholds, budget_status
from app.settings import Settings


def test_the_settings_hold_the_thresholds() -> None:
    s = Settings(database_url="sqlite://", status_likely_over=0.8, status_at_risk=0.3)
    assert s.status_thresholds == StatusThresholds(likely_over=0.8, at_risk=0.3)
    assert Settings(database_url="sqlite://").status_thresholds == StatusThresholds(0.5, 0.1)
    # P(over) = 0.5 is likely_over by default, at_risk under these.
    assert budget_status(0.0, 0.5, 1000.0, s.status_thresholds) is BudgetStatus.AT_RISK


def test_inverted_or_out_of_range_thresholds_are_refused_by_name() -> None:
    with pytest.raises(ValidationError) as inverted:
        Settings(database_url="sqlite://", status_likely_over=0.3, status_at_risk=0.4)
    message = str(inverted.value)
    assert "CADENCE_STATUS_AT_RISK (0.4)" in message
    assert "CADENCE_STATUS_LIKELY_OVER (0.3)" in message
    for field, value in (("status_likely_over", 1.5), ("status_at_risk", 0.0)):
        with pytest.raises(ValidationError, match=field):
            Settings(database_url="sqlite://", **{field: value})


def test_a_database_hands_its_thresholds_to_every_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    db = make_database(Settings(database_url=url, status_likely_over=0.7))
    try:
        with db.read() as session:
            assert status_thresholds_of(session) == StatusThresholds(0.7, 0.1)
        with db.write() as session:
            assert status_thresholds_of(session) == StatusThresholds(0.7, 0.1)
    finally:
        db.engine.dispose()
    plain = Database(db.engine)
    with plain.read() as session:
        assert status_thresholds_of(session) == StatusThresholds()
