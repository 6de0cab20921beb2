"""``cadence report-evaluations``: post a pipeline's evaluations from a file.

The file is JSON (a list, or ``{"evaluations": [...]}``), JSON lines, or CSV with the
columns ``run_id,evaluated_at,value[,metric]``. Batches of up to 1000, each all or
nothing; retries are safe (stored evaluations come back as "already there").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from cadence_client.client import CadenceClient
from cadence_client.errors import AuthError, CadenceAPIError, ConflictError, ServiceUnavailable
from cadence_client.refusal import RecordName, print_refusal

BATCH = 1000
COLUMNS = ("run_id", "evaluated_at", "value", "metric")
OK, REFUSED, USAGE, CONFLICT, AUTH, UNAVAILABLE = 0, 1, 2, 3, 4, 5


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report-evaluations",
        help="post a pipeline's evaluations (model quality by age) from a file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pipeline", required=True)
    p.add_argument("--file", type=Path, required=True, help=".json, .jsonl or .csv")
    p.add_argument("--url", default=None, help="default: $CADENCE_URL, else 127.0.0.1:8000")
    p.add_argument("--token", default=None, help="an ingest token (default: $CADENCE_TOKEN)")
    p.set_defaults(func=run)


def read(path: Path) -> list[dict[str, Any]]:
    """The evaluations in ``path``; ValueError naming the line or item when unreadable."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        unknown = set(rows[0]) - set(COLUMNS) if rows else set()
        if unknown:
            raise ValueError(f"line 1: unknown column(s) {sorted(unknown)}; use {COLUMNS}")
        out = []
        for n, row in enumerate(rows, start=2):
            item: dict[str, Any] = {k: v for k, v in row.items() if v}
            try:
                item["value"] = float(item["value"])
            except (KeyError, ValueError):
                raise ValueError(f"line {n}: value must be a number") from None
            if not math.isfinite(item["value"]):
                raise ValueError(f"line {n}: value must be finite")
            out.append(item)
        return out
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, dict) and isinstance(data.get("evaluations"), list):
        data = data["evaluations"]
    return list(data) if isinstance(data, list) else [data]


def run(args: argparse.Namespace, *, transport: httpx.BaseTransport | None = None) -> int:
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token:
        print("cadence: no token: pass --token or set CADENCE_TOKEN", file=sys.stderr)
        return USAGE
    try:
        items = read(args.file)
    except (OSError, ValueError) as exc:
        print(f"cadence: {args.file}: {exc}", file=sys.stderr)
        return USAGE
    url = args.url or os.environ.get("CADENCE_URL") or "http://127.0.0.1:8000"
    created = existing = offset = 0
    try:
        with CadenceClient(url, token, transport=transport) as client:
            for offset in range(0, len(items), BATCH):
                body = client.post_evaluations(args.pipeline, items[offset : offset + BATCH])
                created += int(body["created"])
                existing += int(body["existing"])
    except CadenceAPIError as exc:
        print_refusal(exc, _evaluation_name(items, args.file, offset))
        if isinstance(exc, AuthError):
            return AUTH
        return CONFLICT if isinstance(exc, ConflictError) else REFUSED
    except ServiceUnavailable as exc:
        print(f"cadence: server unavailable: {exc.message}", file=sys.stderr)
        return UNAVAILABLE
    print(f"{len(items)} evaluations stored: {created} created, {existing} already there")
    return OK


def _evaluation_name(items: list[dict[str, Any]], path: Path, offset: int) -> RecordName:
    """Item ``i`` of the batch at ``offset`` as the file's reader knows it: its place in
    the file and its run_id."""

    def name(index: int) -> str | None:
        if offset + index >= len(items):
            return None
        item = items[offset + index]
        run_id = item.get("run_id") if isinstance(item, dict) else None
        place = f"{path} evaluation {offset + index + 1}"
        return place + (f" (run {run_id})" if run_id else "")

    return name
