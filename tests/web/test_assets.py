"""Static files: fingerprinted URLs, year-long caching for the current hash, gzip."""

from __future__ import annotations

import gzip
import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from app.assets import IMMUTABLE, REVALIDATE, accepts_gzip, asset, asset_url

PLOTLY = "vendor/plotly-basic.min.js"


def test_the_url_carries_the_hash_of_the_bytes() -> None:
    found = asset("cadence.css")
    assert found is not None
    expected = hashlib.sha256(found.body).hexdigest()[:12]
    assert asset_url("cadence.css") == f"/static/cadence.css?v={expected}"
    with pytest.raises(LookupError):
        asset_url("no-such-file.js")


def test_current_hash_is_immutable_and_gzipped(client: TestClient) -> None:
    r = client.get(asset_url(PLOTLY), headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["cache-control"] == IMMUTABLE
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["vary"] == "Accept-Encoding"
    wire = int(r.headers["content-length"])
    # The basic bundle: 1.2 MB of text, about 0.4 MB on the wire.
    assert len(r.content) > 1_000_000 and wire < 450_000, (len(r.content), wire)


def test_without_gzip_the_body_is_plain(client: TestClient) -> None:
    r = client.get(asset_url("dashboard.js"), headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200
    assert "content-encoding" not in r.headers
    found = asset("dashboard.js")
    assert found is not None and found.gzipped is not None
    assert r.content == found.body == gzip.decompress(found.gzipped)


def test_a_stale_or_missing_hash_is_revalidated(client: TestClient) -> None:
    for url in ("/static/cadence.css", "/static/cadence.css?v=000000000000"):
        r = client.get(url)
        assert r.status_code == 200
        assert r.headers["cache-control"] == REVALIDATE, url
    etag = client.get("/static/cadence.css").headers["etag"]
    again = client.get("/static/cadence.css", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("path", ["../pyproject.toml", "..%2Fpyproject.toml", "nope.css", "vendor"])
def test_nothing_outside_the_static_folder(client: TestClient, path: str) -> None:
    r = client.get(f"/static/{path}")
    assert r.status_code == 404, path


def test_pages_link_fingerprinted_assets(client: TestClient) -> None:
    html = client.get("/").text
    links = re.findall(r'(?:href|src)="(/static/[^"]+)"', html)
    assert links and all(re.search(r"\?v=[0-9a-f]{12}$", link) for link in links), links


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.8", True),
        ("gzip;q=0", False),
        ("identity", False),
        ("", False),
        ("*", True),
    ],
)
def test_accepts_gzip(header: str, expected: bool) -> None:
    assert accepts_gzip(header) is expected


def test_words_wrap_between_words_on_a_phone() -> None:
    """Issue 35: phone words broke mid-word. Text wraps between words, hyphenates, and
    breaks a word only when it cannot fit a line (overflow-wrap: break-word); nothing but
    preformatted text may break anywhere."""
    found = asset("cadence.css")
    assert found is not None
    css = found.body.decode()
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert "word-break" not in rules
    assert [line for line in rules.splitlines() if "anywhere" in line] == [
        line for line in rules.splitlines() if line.startswith("pre {")
    ]
    assert ".page-head h1 { overflow-wrap: break-word; hyphens: auto; }" in rules
