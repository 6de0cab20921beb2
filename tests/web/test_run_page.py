"""A run's page and the side-by-side comparison of two runs."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run


def post(client: TestClient, headers: dict[str, str], **overrides: object) -> int:
    r = client.post("/api/v1/runs", json=make_run(**overrides), headers=headers)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_run_page_shows_every_field_interruptions_tags_and_the_cost_working(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    pk = post(
        client, ingest_headers, run_id="r-1", tags={"team": "<b>ranking</b>"},
        interruptions=[{"lost_progress_hours": 0.5, "resume_hours": 0.25, "cause": "preempted"}],
    )  # fmt: skip
    api = client.get(f"/api/v1/runs/{pk}").json()
    html = client.get(f"/runs/{pk}").text
    # e.g. 32.00 GPU-hours x $2.50 per GPU-hour = $80.00: the API's own numbers.
    working = (
        f"{api['gpu_hours']:,.2f} GPU-hours × ${api['effective_price_per_gpu_hour']:,.2f} per "
        f"GPU-hour = ${api['cost_usd']:,.2f}"
    )
    assert working in html
    for field in ("run_id", "variant", "gpu_hours", "mfu", "scheduling_wait_hours", "cost_usd"):
        assert f'data-field="{field}"' in html, field
    assert "preempted" in html and "&lt;b&gt;ranking&lt;/b&gt;" in html
    listing = client.get(f"/pipelines/{api['pipeline']}").text
    assert f'href="/runs/{pk}"' in listing  # run ids link to their page


def test_compare_marks_the_differences(client: TestClient, ingest_headers: dict[str, str]) -> None:
    a = post(client, ingest_headers, run_id="a-1", variant="baseline", gpu_utilization=0.4)
    b = post(client, ingest_headers, run_id="b-1", variant="candidate", gpu_utilization=0.7)
    html = client.get("/runs/compare", params={"a": a, "b": b}).text
    assert "<strong>baseline</strong>" in html and "<strong>candidate</strong>" in html
    assert "<strong>0.4</strong>" in html and "<strong>0.7</strong>" in html
    assert client.get("/runs/compare", params={"a": a, "b": 999999}).status_code == 404
    assert client.get("/runs/999999").status_code == 404
