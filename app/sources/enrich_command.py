"""``cadence enrich prometheus``: stored runs get their utilization from DCGM series.

For each stored run without utilization (every run with ``--overwrite``), one range
query over the run's window asks Prometheus for both DCGM metrics averaged over the
run's GPUs; ``app.planning.dcgm.choose`` picks the value; the changes go to the
measurements endpoint in batches. Runs whose series are missing are listed, never
guessed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
from cadence_client import CadenceAPIError, ServiceUnavailable

# The exit codes and connection flags of `cadence report`, shared by every importer.
from cadence_client.commands import report
from cadence_client.refusal import print_refusal

from app.planning.dcgm import Choice
from app.sources.posting import Mapped, SourceError, error, post_mapped
from app.sources.prometheus import (
    AnswerError,
    TemplateError,
    Window,
    check_template,
    choice,
    expected_points,
    window,
)
from app.sources.prometheus_api import PrometheusClient, PrometheusError

BATCH = 1000
SHOWN_ROWS = 50  # a dry run prints this many runs, then counts


def add_parser(sub: Any) -> None:
    enrich = sub.add_parser(
        "enrich", help="fill stored runs' measurements from a monitoring system"
    )
    esub = enrich.add_subparsers(dest="enrich_source", required=True)
    p = esub.add_parser(
        "prometheus",
        help="utilization from DCGM metrics in Prometheus",
        description="For each stored run lacking utilization, the mean over its window of "
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE (else DCGM_FI_DEV_GPU_UTIL / 100) over the GPUs "
        "--match selects. A profiling metric at ~0 while GPU_UTIL is above 50% uses "
        "GPU_UTIL, and says so.",
        epilog="example:\n  cadence enrich prometheus --prometheus-url http://127.0.0.1:9090 "
        '\\\n    --match \'pod=~"{run_id}-.*", namespace="{namespace}"\' --pipeline ranker',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--prometheus-url", required=True, help="e.g. http://127.0.0.1:9090")
    p.add_argument(
        "--match",
        required=True,
        help="PromQL label matcher with {run_id}, {pipeline} and {TAG} placeholders",
    )
    p.add_argument("--pipeline", help="only this pipeline's runs (default: every pipeline)")
    p.add_argument("--since", help="only runs started on or after this day, YYYY-MM-DD")
    p.add_argument("--overwrite", action="store_true", help="also runs that have utilization")
    p.add_argument("--dry-run", action="store_true", help="print what would change; post nothing")
    p.add_argument("--prometheus-token", help="bearer token for Prometheus ($PROMETHEUS_TOKEN)")
    p.add_argument("--concurrency", type=int, default=4, help="queries at once (default 4)")
    p.add_argument(
        "--min-coverage",
        type=float,
        help="skip (list, leave unenriched) runs whose series cover less than this share "
        "of their wall clock, e.g. 0.9 (default: store them with a note)",
    )
    report._connection_args(p, "an ingest token (default: $CADENCE_TOKEN)")
    p.set_defaults(func=lambda _settings, args: run_enrich(args))


def run_enrich(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    prometheus_transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    checked = _checked(args)
    if isinstance(checked, int):
        return checked
    since, token = checked
    prom_token = args.prometheus_token or os.environ.get("PROMETHEUS_TOKEN")
    try:
        with report.client_for(args, token, transport, sleep) as cadence:
            return _enrich(args, cadence, since, prom_token, prometheus_transport)
    except PrometheusError as exc:
        error(exc.message)
        return report.USAGE
    except ServiceUnavailable as exc:
        error(f"Cadence unreachable at {exc.url}: {exc.message}")
        return report.UNAVAILABLE
    except CadenceAPIError as exc:
        print_refusal(exc, lead="Cadence ")
        return report._exit_code(exc)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        error(f"bad --url: {exc}")
        return report.USAGE


def _checked(args: argparse.Namespace) -> tuple[datetime | None, str | None] | int:
    """(--since, the Cadence token) once --match, --since, --min-coverage and the token
    are checked; else the usage exit code, the reason said."""
    try:
        check_template(args.match)
        since = datetime.fromisoformat(args.since).replace(tzinfo=UTC) if args.since else None
    except TemplateError as exc:
        error(str(exc))
        return report.USAGE
    except ValueError:
        error(f"--since {args.since!r}: expected YYYY-MM-DD")
        return report.USAGE
    floor = args.min_coverage
    if floor is not None and not 0 < floor <= 1:
        error(f"--min-coverage {floor:g}: expected a share of the wall clock, in (0, 1]")
        return report.USAGE
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token and not args.dry_run:
        error("no token: pass --token or set CADENCE_TOKEN (an ingest token)")
        return report.USAGE
    return since, token


def _enrich(
    args: argparse.Namespace,
    cadence: Any,
    since: datetime | None,
    prom_token: str | None,
    prometheus_transport: httpx.BaseTransport | None,
) -> int:
    """The stored runs without a utilization (all with --overwrite) measured in
    Prometheus, then shown (--dry-run) or posted."""
    runs = [
        r
        for r in cadence.list_runs(pipeline=args.pipeline, since=since)
        if args.overwrite or r.get("gpu_utilization") is None
    ]
    print(f"{len(runs)} stored runs to enrich", file=sys.stderr)
    with PrometheusClient(args.prometheus_url, prom_token, transport=prometheus_transport) as prom:
        found, unread = measure(prom, args.match, runs, max(1, args.concurrency), args.min_coverage)
    for run_id, reason in unread:
        print(f"not enriched: run {run_id}: {reason}", file=sys.stderr)
    if args.dry_run:
        print(table(found))
        print(f"dry run: {len(found)} would change, {len(unread)} not; nothing posted")
        return report.OK
    return post(cadence, found, len(unread))


Found = list[tuple[dict[str, Any], Choice]]


def measure(
    prom: PrometheusClient,
    template: str,
    runs: list[dict[str, Any]],
    workers: int,
    min_coverage: float | None = None,
) -> tuple[Found, list[tuple[str, str]]]:
    """Each run's choice, and (run id, reason) for each run that got none (or whose
    series cover less of its wall clock than ``min_coverage``)."""
    unread: list[tuple[str, str]] = []
    windows: list[tuple[dict[str, Any], Window]] = []
    for run in runs:
        try:
            windows.append((run, window(template, run)))
        except KeyError as exc:
            unread.append((run["run_id"], f"--match needs tag {exc.args[0]!r}; the run has none"))
    found: Found = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # Each worker reduces its answer to a Choice at once: at most ``workers`` answers
        # (each under MAX_ANSWER_BYTES) are held, never a queue of whole answers.
        picks = pool.map(lambda rw: _ask(prom, rw[1]), windows)
        for n, ((run, _w), picked) in enumerate(zip(windows, picks, strict=True), 1):
            if isinstance(picked, str):
                unread.append((run["run_id"], picked))
            elif picked.utilization is None:
                unread.append((run["run_id"], picked.note))
            elif too_short(picked, min_coverage):
                unread.append((run["run_id"], f"{picked.note} (below --min-coverage)"))
            else:
                found.append((run, picked))
            if n % 1000 == 0:
                print(f"queried {n}/{len(windows)} windows", file=sys.stderr)
    return found, unread


def too_short(picked: Choice, min_coverage: float | None) -> bool:
    """Whether the series cover less of the run than ``--min-coverage`` asks."""
    return min_coverage is not None and (picked.coverage or 0.0) < min_coverage


def _ask(prom: PrometheusClient, w: Window) -> Choice | str:
    """The window's choice, or why there is none (an answer too big, of the wrong shape,
    or holding values that are not measurements); a fatal error (unreachable, refused)
    stops all."""
    try:
        return choice(prom.query_range(w), expected_points(w), w.workers)
    except PrometheusError as exc:
        if exc.fatal:
            raise
        return exc.message
    except AnswerError as exc:
        return str(exc)


def table(found: Found) -> str:
    lines = [f"{'PIPELINE':<24} {'RUN':<40} {'OLD':>6} {'NEW':>6} SOURCE"]
    for run, picked in found[:SHOWN_ROWS]:
        old = run.get("gpu_utilization")
        shown = "-" if old is None else f"{old:.3f}"
        lines.append(
            f"{run['pipeline']:<24} {run['run_id']:<40} {shown:>6} "
            f"{picked.utilization:>6.3f} {picked.source}"
            + (f"  ({picked.note})" if picked.note else "")
        )
    if len(found) > SHOWN_ROWS:
        lines.append(f"... and {len(found) - SHOWN_ROWS} more")
    return "\n".join(lines)


def reading(run_id: str, picked: Choice) -> dict[str, Any]:
    """The measurements sent for a run: the value, its source, and (recorded in the
    run's measurement audit beside them) how much of the run its series cover and why
    it was chosen."""
    item: dict[str, Any] = {
        "run_id": run_id,
        "gpu_utilization": picked.utilization,
        "utilization_source": picked.source,
    }
    if picked.coverage is not None:
        item["utilization_coverage"] = round(min(picked.coverage, 1.0), 4)
    if picked.note:
        item["utilization_note"] = picked.note[:500]
    return item


def post(cadence: Any, found: Found, unread: int) -> int:
    by_pipeline: dict[str, list[dict[str, Any]]] = {}
    for run, picked in found:
        if picked.note:
            print(f"note: run {run['run_id']}: {picked.note}", file=sys.stderr)
        by_pipeline.setdefault(run["pipeline"], []).append(reading(run["run_id"], picked))
    updated = unchanged = 0
    for pipeline, items in sorted(by_pipeline.items()):
        totals = cadence.update_measurements(pipeline, items, batch_size=BATCH)
        updated, unchanged = updated + totals["updated"], unchanged + totals["unchanged"]
    print(f"enriched {updated} runs ({unchanged} already had these values), {unread} not enriched")
    return report.OK


# -- the importers' --prometheus-url: utilization filled in before the runs are posted --


def prometheus_args(p: argparse.ArgumentParser, default_match: str) -> None:
    p.add_argument(
        "--prometheus-url",
        help="fill utilization from DCGM metrics in this Prometheus before posting",
    )
    p.add_argument(
        "--match",
        default=default_match,
        help=f"with --prometheus-url: the label matcher (default: {default_match})",
    )
    p.add_argument("--prometheus-token", help="bearer token for Prometheus ($PROMETHEUS_TOKEN)")


class Filler:
    """Gives each batch's records that lack utilization the DCGM value of their window
    (as ``cadence enrich prometheus`` would), just before the batch is posted; those
    without series stay unknown, listed."""

    def __init__(self, prom: PrometheusClient, template: str) -> None:
        self.prom, self.template = prom, template
        self.asked = self.found = 0

    def __call__(self, chunk: list[Mapped]) -> None:
        # A running attempt has no window yet (and takes no utilization until it finishes).
        runs = [
            m.payload
            for m in chunk
            if m.payload and m.payload.get("gpu_utilization") is None and "finished_at" in m.payload
        ]
        try:
            found, unread = measure(self.prom, self.template, runs, 4)
        except PrometheusError as exc:  # unreachable or refused: the import stops here
            raise SourceError(exc.message) from exc
        for run, picked in found:
            run["gpu_utilization"], run["utilization_source"] = picked.utilization, picked.source
            tag_reading(run, picked)
            if picked.note:
                print(f"note: run {run['run_id']}: {picked.note}", file=sys.stderr)
        for run_id, reason in unread:
            print(f"utilization unknown: run {run_id}: {reason}", file=sys.stderr)
        self.asked, self.found = self.asked + len(runs), self.found + len(found)


TAG_ROOM = 48  # the server keeps 50 tags a run: the reading's two go in if they fit


def tag_reading(run: dict[str, Any], picked: Choice) -> None:
    """A record filled before posting keeps its coverage and note in its tags
    (``utilization_coverage``, ``utilization_note``), as the audit keeps them for a
    stored run enriched later."""
    tags = dict(run.get("tags") or {})
    if len(tags) > TAG_ROOM:
        return
    if picked.coverage is not None:
        tags["utilization_coverage"] = f"{min(picked.coverage, 1.0):.2f}"
    if picked.note:
        tags["utilization_note"] = picked.note[:500]
    run["tags"] = tags


def fill_and_post(
    args: argparse.Namespace,
    mapped: Iterable[Mapped],
    prometheus_transport: httpx.BaseTransport | None = None,
    **post: Any,
) -> int:
    """An importer's last step: the check of every record, then the posts, each batch
    given utilization from Prometheus first if asked."""
    if not args.prometheus_url:
        return post_mapped(args, mapped, **post)
    try:
        check_template(args.match)
    except TemplateError as exc:
        error(str(exc))
        return report.USAGE
    token = args.prometheus_token or os.environ.get("PROMETHEUS_TOKEN")
    with PrometheusClient(args.prometheus_url, token, transport=prometheus_transport) as prom:
        filler = Filler(prom, args.match)
        code = post_mapped(args, mapped, prepare=filler, **post)
    if filler.asked:
        shown = f"{filler.found} of {filler.asked} runs"
        print(f"utilization from Prometheus: {shown}", file=sys.stderr)
    return code
