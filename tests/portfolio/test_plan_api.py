"""GET /api/v1/portfolio/plan and its CSV: the organisation's cadence plan over the demo."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_plan_answers_in_words_then_rows(demo: TestClient) -> None:
    r = demo.get("/api/v1/portfolio/plan", params={"budget": 50_000, "risk": 0.1})
    assert r.status_code == 200, r.text
    body = r.json()
    print(body)
