"""Constants and small helpers shared by the browser tests (fixtures live in conftest)."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

XSS_PIPELINE = "xss-pipe"
XSS_DISPLAY_NAME = "</script><script>alert(1)</script>"
XSS_VARIANT = "</script><script>alert(2)</script>"
XSS_TAG = "<img src=x onerror=alert(3)>"
EMPTY_PIPELINE = "empty-pipe"
RANKER = "recsys-ranker"
FRAUD = "fraud-detector"

# For every [data-figure] div: its embedded figure, and what Plotly drew from it.
CHART_STATE_JS = """
() => Array.from(document.querySelectorAll('[data-figure]')).map(el => {
  const source = document.getElementById(el.dataset.figure);
  const fig = JSON.parse(source.textContent);
  const svg = el.querySelector('svg.main-svg');
  return {
    id: el.id || el.dataset.figure,
    rendered: el.getAttribute('data-rendered'),
    embedded: fig.data.length,
    names: fig.data.map(t => t.name === undefined ? null : t.name),
    plotted: Array.isArray(el.data) ? el.data.length : null,
    drawn: el.querySelectorAll('.cartesianlayer .trace').length,
    svg: svg !== null,
    width: svg ? svg.getBoundingClientRect().width : 0,
    boxWidth: el.getBoundingClientRect().width,
    visible: el.offsetParent !== null,
  };
})
"""


def money(text: str) -> float:
    """``"$2,456"`` -> ``2456.0``."""
    match = re.search(r"-?\$\s?([\d,]+(?:\.\d+)?)", text)
    assert match, f"no dollar amount in {text!r}"
    return float(match.group(1).replace(",", ""))


def number(text: str) -> float:
    """``"1,234.5"`` or ``"38%"`` -> a float (the percent sign is dropped)."""
    cleaned = text.strip().replace(",", "").replace("%", "").replace("$", "")
    return float(cleaned)


def wait_for_charts(page: Any) -> None:
    """Until every [data-figure] div has been drawn by dashboard.js (an SVG inside)."""
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('[data-figure]')).every(
             el => el.getAttribute('data-rendered') === '1' && el.querySelector('svg.main-svg'))"""
    )


def chart_state(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(CHART_STATE_JS)  # type: ignore[no-any-return]


@contextmanager
def serve_in_thread(app: Any, name: str = "live server") -> Iterator[str]:
    """Serve ``app`` with a real uvicorn on a free loopback port; yields its base URL
    once /healthz answers, and stops the server on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if not thread.is_alive() or time.monotonic() > deadline:
                pytest.fail(f"the {name} did not answer /healthz on {base}")
            time.sleep(0.05)
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
