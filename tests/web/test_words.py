"""One name for the monthly figure (issue 35 item 1): the rendered pages say "expected
bill" and none of the retired words; "median" names only a typical retraining."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

RETIRED = (
    "spend per month",
    "per month median",
    "projected month",
    "projected monthly",
    "monthly spend",
    "median month",
    "median cost per run",
    "median monthly",
    "month median",
)


def visible_text(html: str) -> str:
    """The words a reader sees (and a screen reader reads): tags and scripts out."""
    html = re.sub(r"<script.*?</script>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).lower()


def pages(demo: TestClient) -> dict[str, str]:
    names = [p["name"] for p in demo.get("/api/v1/pipelines").json()["pipelines"]]
    assert names, "the demo has pipelines"
    found = {"/": demo.get("/").text, "/review": demo.get("/review").text}
    found["/help"] = demo.get("/help").text
    for name in names:
        found[f"/pipelines/{name}"] = demo.get(f"/pipelines/{name}").text
    return found


def test_no_page_says_a_retired_word(demo: TestClient) -> None:
    for path, html in pages(demo).items():
        text = visible_text(html)
        said = [w for w in RETIRED if w in text]
        assert not said, f"{path} says {said}"
        # and the figures (chart captions, hover texts) inside the page's JSON too
        assert not [w for w in RETIRED if w in html.lower()], path


@pytest.mark.parametrize("path", ["/", "/review", "/help", "pipeline"])
def test_every_page_names_the_expected_bill(demo: TestClient, path: str) -> None:
    found = pages(demo)
    html = (
        next(v for k, v in found.items() if k.startswith("/pipelines/"))
        if path == ("pipeline")
        else found[path]
    )
    assert "expected bill" in visible_text(html)


def test_median_names_only_a_typical_retraining(demo: TestClient) -> None:
    # Every "median" a page says is about a retraining (or a run, a utilization), never
    # a month: the words just after it are checked.
    for path, html in pages(demo).items():
        for m in re.finditer(r"median\W+(\w+\W+\w+)", visible_text(html)):
            assert "month" not in m.group(1), (path, m.group(0))
