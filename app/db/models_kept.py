"""What the workers keep, kept by the database too (``app.db.kept_snapshot``): one row
per code version, the shared maps' values as one payload, so a worker that starts finds
what another worker (or itself before a restart) made. Re-exported by ``app.db.models``
so Alembic sees it. Never a source of truth: a row may be deleted at any time, and a
worker then starts cold."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime


class KeptSnapshot(Base):
    __tablename__ = "kept_snapshot"

    # The digest of the code and numeric libraries the values were made by
    # (``kept_snapshot.CODE``): a worker reads only its own code's row.
    code: Mapped[str] = mapped_column(String(64), primary_key=True)
    written_at: Mapped[datetime] = mapped_column(UTCDateTime)
    entries: Mapped[int] = mapped_column(Integer)  # how many values the payload holds
    payload: Mapped[bytes] = mapped_column(LargeBinary)
