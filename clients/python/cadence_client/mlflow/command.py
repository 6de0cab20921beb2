"""``cadence import mlflow``: copy an MLflow experiment's finished runs into Cadence.

The MLflow run id becomes Cadence's ``run_id``, so importing again is safe: runs already
stored come back as "already there".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cadence_client.client import BatchResult, CadenceClient
from cadence_client.commands.report import (
    BATCH_SIZE,
    DEFAULT_URL,
    OK,
    UNAVAILABLE,
    USAGE,
    _connection_args,
    _exit_code,
)
from cadence_client.errors import CadenceAPIError, ServiceUnavailable, ValidationFailed
from cadence_client.mlflow.evaluations import evaluations_of
from cadence_client.mlflow.evaluations import post as post_evaluations
from cadence_client.mlflow.mapping import (
    History,
    Mapped,
    Mapping,
    MappingError,
    load_mapping,
    map_run,
    run_id_of,
)
from cadence_client.mlflow.mlflow_api import MlflowClient, MlflowError
from cadence_client.refusal import print_refusal

EXIT_CODES = """exit codes:
  0  done (runs skipped for missing fields still exit 0; each is printed)
  1  Cadence refused a run (422)
  2  usage, mapping file or MLflow error (experiment not found, server unreachable)
  3  conflict (409): a run is already stored with different values
  4  authentication (401) or authorization (403) failed
  5  Cadence was unavailable after retries"""


def add_parsers(sub: Any) -> None:
    """Register ``import mlflow`` on the ``cadence`` subcommand parser."""
    imp = sub.add_parser("import", help="import runs from another tracker (mlflow)")
    isub = imp.add_subparsers(dest="import_source", required=True)
    p = isub.add_parser(
        "mlflow",
        help="import an MLflow experiment's finished, failed and killed runs",
        description="Read an experiment's runs from an MLflow tracking server's REST API "
        "and post them to Cadence. The MLflow run id is the Cadence run_id, so importing "
        "again is safe.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tracking-uri", required=True, help="e.g. http://127.0.0.1:5000")
    p.add_argument("--experiment", required=True, help="the MLflow experiment's name")
    p.add_argument("--pipeline", required=True, help="the Cadence pipeline slug")
    p.add_argument("--mapping", type=Path, help="TOML mapping file (see docs/importers.md)")
    p.add_argument(
        "--variant-tag", help="MLflow tag holding the variant (default: variant; else baseline)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the runs as JSON lines; post nothing"
    )
    _connection_args(p, "an ingest token (default: $CADENCE_TOKEN; not needed with --dry-run)")
    p.set_defaults(func=run_import)


def _error(message: str) -> None:
    print(f"cadence: {message}", file=sys.stderr)


def run_import(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    mlflow_transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    try:
        mapping = load_mapping(args.mapping) if args.mapping else Mapping()
    except MappingError as exc:
        _error(f"mapping: {exc}")
        return USAGE
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token and not args.dry_run:
        _error("no token: pass --token or set CADENCE_TOKEN (an ingest token)")
        return USAGE
    try:
        experiment_id, found, mapped, evals = _read_mlflow(args, mapping, mlflow_transport)
    except MlflowError as exc:
        _error(exc.message)
        return USAGE
    for m in mapped:
        if m.payload is None:
            print(f"skipped {m.run_id}: {m.reason}", file=sys.stderr)
        elif m.note:
            print(f"note: run {m.run_id}: {m.note}", file=sys.stderr)
    ready = [m for m in mapped if m.payload is not None]
    if args.dry_run:
        for m in ready:
            print(json.dumps(m.payload, sort_keys=True))
        print(
            f"dry run: found {found}, would import {len(ready)}, skipped "
            f"{len(mapped) - len(ready)} (experiment {args.experiment!r} id {experiment_id}); "
            "nothing posted",
            file=sys.stderr,
        )
        return OK
    url = args.url or os.environ.get("CADENCE_URL") or DEFAULT_URL
    tally = Tally(found, skipped=len(mapped) - len(ready))
    try:
        with CadenceClient(url, token, transport=transport, sleep=sleep) as client:
            code = _post_all(client, ready, evals, args.pipeline, tally)
    except ServiceUnavailable as exc:
        _error(f"server unavailable at {exc.url}: {exc.message}")
        tally.say(partial=True)
        return UNAVAILABLE
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        _error(f"bad --url: {exc}")
        return USAGE
    if code == OK:
        tally.say()
    return code


def _read_mlflow(
    args: argparse.Namespace, mapping: Mapping, transport: httpx.BaseTransport | None
) -> tuple[str, int, list[Mapped], list[dict[str, Any]]]:
    """The experiment's id, how many runs it has, each mapped, and their evaluations
    (when the mapping asks for them and something will be posted)."""
    with MlflowClient(args.tracking_uri, transport=transport) as mlflow:
        experiment_id = mlflow.experiment_id(args.experiment)
        # Each run is mapped as its page arrives: the raw runs are never held together.
        mapped = [
            map_run(r, args.pipeline, mapping, args.variant_tag, _history(mlflow, r))
            for r in mlflow.search_runs(experiment_id)
        ]
        evals = []
        if mapping.evaluations and not args.dry_run:
            ready_now = [m for m in mapped if m.payload is not None]
            evals = evaluations_of(mlflow, ready_now, mapping.evaluations)
    return experiment_id, len(mapped), mapped, evals


@dataclass
class Tally:
    """What the import has done so far, for its last line."""

    found: int
    skipped: int = 0
    created: int = 0
    existing: int = 0

    def say(self, partial: bool = False) -> None:
        line = (
            f"found {self.found}, imported {self.created + self.existing} ({self.created} "
            f"created / {self.existing} already there), skipped {self.skipped}"
        )
        if partial:
            _error(f"stopped early: {line}")
        else:
            print(line)


def _post_all(
    client: CadenceClient,
    ready: list[Mapped],
    evals: list[dict[str, Any]],
    pipeline: str,
    tally: Tally,
) -> int:
    """Post the runs in batches, then the evaluations; a refusal is printed, with the
    partial tally, and its exit code returned."""
    for offset in range(0, len(ready), BATCH_SIZE):
        chunk = ready[offset : offset + BATCH_SIZE]
        try:
            result, refused = _post(client, chunk)
        except CadenceAPIError as exc:
            _refused(exc, chunk)
            tally.say(partial=True)
            return _exit_code(exc)
        tally.skipped += refused
        tally.created += result.created
        tally.existing += result.existing
    if evals:
        try:
            new, old = post_evaluations(client, pipeline, evals)
        except CadenceAPIError as exc:
            _refused(exc, [])
            tally.say(partial=True)
            return _exit_code(exc)
        print(f"evaluations: {len(evals)} ({new} created / {old} already there)")
    return OK


def _history(mlflow: MlflowClient, run: dict[str, Any]) -> History:
    run_id = run_id_of(run)
    return lambda key: mlflow.metric_history(run_id, key)


def _post(client: CadenceClient, chunk: list[Mapped]) -> tuple[BatchResult, int]:
    """Post a chunk; runs the server refuses (422 naming them) are skipped with its
    reason and the rest posted again (a refused batch stores nothing). The number of
    runs skipped comes back with the result."""
    left, refused = list(chunk), 0
    while True:
        try:
            return client.post_runs([m.payload or {} for m in left], batch_size=BATCH_SIZE), refused
        except ValidationFailed as exc:
            reasons = _reasons_by_run(exc, len(left))
            if not reasons:
                raise
            for index, why in sorted(reasons.items()):
                print(f"skipped {left[index].run_id}: invalid for Cadence: {why}", file=sys.stderr)
            left = [m for i, m in enumerate(left) if i not in reasons]
            refused += len(reasons)
            if not left:
                return BatchResult(), refused


def _reasons_by_run(exc: ValidationFailed, count: int) -> dict[int, str]:
    """``runs.3.data_stall_hours: reason`` -> {3: "data_stall_hours: reason"}; empty when
    a refused field names no run of the batch."""
    out: dict[int, str] = {}
    for item in exc.fields:
        parts = str(item.get("field", "")).split(".", 2)
        if len(parts) < 2 or parts[0] != "runs" or not parts[1].isdigit():
            return {}
        index = int(parts[1])
        if index >= count:
            return {}
        what = f"{parts[2] if len(parts) == 3 else 'run'}: {item.get('reason', '')}"
        out[index] = f"{out[index]}; {what}" if index in out else what
    return out


def _refused(exc: CadenceAPIError, chunk: list[Mapped]) -> None:
    """Each refused field named by its MLflow run."""
    print_refusal(
        exc, lambda index: f"MLflow run {chunk[index].run_id}" if index < len(chunk) else None
    )
