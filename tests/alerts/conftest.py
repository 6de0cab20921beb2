"""Fixtures of the alert tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.settings import Settings
from tests.fixtures.alerts import alert_settings


@pytest.fixture
def app_client(db: Database, settings: Settings) -> Iterator[TestClient]:
    """The app with webhooks allowed to reach the local receiver."""
    with TestClient(create_app(alert_settings(settings), database=db)) as c:
        yield c
