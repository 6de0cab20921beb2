"""One list of alert kinds: the enum, its thresholds and the table's check constraint."""

from __future__ import annotations

import re

from sqlalchemy import CheckConstraint

from app.alerts.rules import THRESHOLD_RANGES, AlertKind
from app.db.models import AlertRule


def quoted(text: str) -> set[str]:
    return set(re.findall(r"'([a-z_]+)'", text))


def test_the_check_constraint_lists_exactly_the_alert_kinds() -> None:
    [check] = [c for c in AlertRule.__table__.constraints if isinstance(c, CheckConstraint)]
    assert quoted(str(check.sqltext)) == {k.value for k in AlertKind}


def test_every_kind_has_a_threshold_range() -> None:
    assert set(THRESHOLD_RANGES) == set(AlertKind)
