"""The org setting's queries (one row, id 1)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import OrgSetting

ROW_ID = 1


def org_setting(session: Session) -> OrgSetting | None:
    return session.scalar(select(OrgSetting).where(OrgSetting.id == ROW_ID))
