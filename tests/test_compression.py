"""gzip for pages and API answers (app.middleware.Compression): what is compressed, what
is not, and that the body limit, the metrics and streamed downloads still work."""

from __future__ import annotations

import gzip

from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.middleware import GZIP_MINIMUM_BYTES
from app.settings import PROJECT_ROOT, Settings
from tests.fixtures.builders import make_run
from tests.fixtures.metrics import scrape, value

GZIP = {"Accept-Encoding": "gzip"}
IDENTITY = {"Accept-Encoding": "identity"}


def raw_get(client: TestClient, path: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    """The answer's headers and its bytes as sent (httpx would decode them otherwise)."""
    with client.stream("GET", path, headers=headers) as answer:
        assert answer.status_code == 200, path
        return dict(answer.headers), b"".join(answer.iter_raw())


def test_a_page_is_gzipped_for_a_browser_and_plain_otherwise(demo: TestClient) -> None:
    headers, packed = raw_get(demo, "/pipelines/recsys-ranker", GZIP)
    assert headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    page = gzip.decompress(packed)
    assert b"<html" in page and len(packed) < len(page) / 3  # HTML shrinks 4-5x
    plain_headers, plain = raw_get(demo, "/pipelines/recsys-ranker", IDENTITY)
    assert "content-encoding" not in plain_headers
    assert plain.startswith(b"<!DOCTYPE html>") or b"<html" in plain[:200]


def test_json_above_the_minimum_is_gzipped_and_small_answers_are_not(demo: TestClient) -> None:
    headers, packed = raw_get(demo, "/api/v1/pipelines/recsys-ranker/projection", GZIP)
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(packed).startswith(b"{")
    small_headers, small = raw_get(demo, "/healthz", GZIP)
    assert len(small) < GZIP_MINIMUM_BYTES
    assert "content-encoding" not in small_headers


def test_a_streamed_csv_download_is_gzipped_whole(demo: TestClient) -> None:
    headers, packed = raw_get(demo, "/pipelines/recsys-ranker/runs.csv", GZIP)
    _, plain = raw_get(demo, "/pipelines/recsys-ranker/runs.csv", IDENTITY)
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(packed) == plain and plain.count(b"\n") > 10


def test_static_files_are_not_compressed_twice(demo: TestClient) -> None:
    page = demo.get("/pipelines/recsys-ranker").text
    script = page[page.index("/static/dashboard.js") :].split('"')[0]
    headers, packed = raw_get(demo, script, GZIP)
    assert headers["content-encoding"] == "gzip"
    # gzipped once, at start-up: one decompression gives the file itself
    assert gzip.decompress(packed) == (PROJECT_ROOT / "static" / "dashboard.js").read_bytes()


def test_the_body_limit_and_the_metrics_see_through_it(db: Database, settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 2048})
    with TestClient(create_app(small, database=db)) as c:
        big = {"runs": [make_run(run_id=f"r{i}") for i in range(20)]}
        refused = c.post("/api/v1/runs/batch", json=big, headers=GZIP)
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "payload_too_large"
        assert c.get("/", headers=GZIP).status_code == 200
        samples = scrape(c)
    assert value(samples, "cadence_ingest_rejections_total", reason="payload_too_large") == 1
    assert value(samples, "cadence_http_requests_total", method="GET", route="/", status="200") == 1
