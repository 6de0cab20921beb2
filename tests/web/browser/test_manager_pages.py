"""The manager's pages in a real browser: the weekly review (the settings form, which
needs the token-mode server, is in test_security.py)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from app.planning.weekly import iso_week, last_complete_week
from tests.fixtures.browser import RANKER, chart_state, wait_for_charts

pytestmark = pytest.mark.browser


def test_review_opens_on_last_week_with_trend_and_exports(page, problems, live_server):
    page.goto(live_server.url("/review"))
    week = iso_week(last_complete_week(datetime.now(UTC).date()))
    expect(page.locator("h1")).to_have_text(f"Weekly goodput review: {week}")
    expect(page.locator("header.page-head")).to_contain_text("weeks in UTC")
    # No link into the future from the last complete week but the current one.
    links = page.locator("header.page-head a").all_inner_texts()
    assert sum(1 for t in links if t.endswith("→")) == 1
    wait_for_charts(page)
    trend = next(c for c in chart_state(page) if c["id"] == "chart-review_trend")
    assert trend["names"] == ["Spend", "Goodput"] and trend["svg"], trend
    expect(page.locator("tr[data-totals]")).to_contain_text("All pipelines")
    expect(page.locator(f"tr[data-pipeline={RANKER}] td[data-cause=data_stall]")).to_contain_text(
        "GPU-h"
    )
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert rows[-1]["pipeline"] == "TOTAL" and rows[0]["week"] == week
    shown = page.locator("tbody tr[data-pipeline]").evaluate_all(
        "rows => rows.map(r => r.dataset.pipeline)"
    )
    assert [r["pipeline"] for r in rows[:-1]] == shown  # the same lines, the same order
    problems.assert_clean()
