"""Charts survive ordinary run ids, and one failing figure never blanks the others."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import chart_state, wait_for_charts

pytestmark = pytest.mark.browser

UUID_PIPELINE = "uuid-runs"
NARROW = {"width": 1280, "height": 900}  # where 15+ UUID run ids broke the per-run chart
# Make Plotly.react throw for one element, as Plotly does on "axis scaling" failures.
FAIL_ONE_CHART_JS = """
(() => {
  let real;
  Object.defineProperty(window, 'Plotly', {
    configurable: true,
    get() { return real; },
    set(value) {
      const react = value.react;
      value.react = function (el, ...rest) {
        if (el.id === 'chart-goodput') {
          throw new Error('Something went wrong with axis scaling');
        }
        return react.call(this, el, ...rest);
      };
      real = value;
    },
  });
})();
"""


@pytest.fixture(scope="module")
def uuid_pipeline(live_server) -> str:
    """20 runs whose ids are UUIDs (36 characters), posted through the API."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)
    runs = []
    for n in range(20):
        began = start + timedelta(days=2 * n)
        runs.append(
            {
                "pipeline": UUID_PIPELINE,
                "run_id": str(uuid.UUID(int=0x5EED_0000_0000_0000_0000_0000_0000_0000 + n)),
                "variant": "candidate" if n % 2 else "baseline",
                "started_at": began.isoformat(),
                "finished_at": (began + timedelta(hours=6)).isoformat(),
                "workers": 4 if n % 3 else 8,
                "gpu_type": "A100",
                "gpu_utilization": 0.4 + n / 100,
                "quality_metric": "auc",
                "quality_value": 0.8 + n / 1000,
                "data_stall_hours": 1.0,
                "checkpoint_hours": 0.25,
                "scheduling_wait_hours": 0.1,
            }
        )
    headers = {"Authorization": f"Bearer {live_server.ingest_token}"}
    with live_server.api() as client:
        r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=headers)
        assert r.status_code == 201, r.text
    return UUID_PIPELINE


def test_twenty_uuid_run_ids_draw_every_chart(page, problems, live_server, uuid_pipeline):
    page.set_viewport_size(NARROW)
    page.goto(live_server.url(f"/pipelines/{uuid_pipeline}"))
    wait_for_charts(page)
    charts = chart_state(page)
    assert len(charts) >= 7, charts
    for chart in charts:
        assert chart["rendered"] == "1" and chart["svg"], chart
        assert chart["plotted"] == chart["embedded"], chart
    # Tick labels are shortened; the full id stays in the figure (hover shows it).
    ticks = page.locator("#chart-run_gpu .xtick text").all_text_contents()
    assert ticks and all(len(t) <= 13 for t in ticks), ticks
    full = page.evaluate("() => document.getElementById('chart-run_gpu').data[0].x")
    assert str(uuid.UUID(int=0x5EED_0000_0000_0000_0000_0000_0000_0000 + 19)) in full
    problems.assert_clean()


def test_a_failing_figure_shows_a_message_and_the_others_render(
    page, problems, live_server, uuid_pipeline
):
    page.add_init_script(FAIL_ONE_CHART_JS)
    page.set_viewport_size(NARROW)
    page.goto(live_server.url(f"/pipelines/{uuid_pipeline}"))
    broken = page.locator("#chart-goodput")
    expect(broken).to_have_attribute("data-rendered", "error")
    expect(broken).to_contain_text("could not be drawn")
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('[data-figure]'))
             .filter(el => el.id !== 'chart-goodput')
             .every(el => el.getAttribute('data-rendered') === '1'
                          && el.querySelector('svg.main-svg'))"""
    )
    others = [c for c in chart_state(page) if c["id"] != "chart-goodput"]
    assert len(others) >= 6 and all(c["rendered"] == "1" for c in others), others
    assert problems.page_errors == []  # handled, not an uncaught error
