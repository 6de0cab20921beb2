"""The ``cadence`` command.

This distribution's commands are the ones a pipeline or CI job needs, with nothing but
httpx: ``report``, ``report-evaluations``, ``export``, ``check``, ``import mlflow`` and
``spool flush``. Other distributions add theirs through the ``cadence.commands``
entry-point group (``cadence_client.plugins``): installing the server adds ``serve``,
``migrate``, ``demo`` and ``token`` to the same script.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from cadence_client.commands import check, evaluations, export, plan, report
from cadence_client.commands.report import (
    OK,
    UNAVAILABLE,
    USAGE,
    _connection_args,
    client_for,
)
from cadence_client.mlflow import command as mlflow_command
from cadence_client.plugins import COMMANDS, entry_points
from cadence_client.spool import Spool

AddParsers = Callable[[Any], None]
DESCRIPTION = (
    "Cadence from a pipeline or CI job: report runs, export them, check a change's cost, "
    "import MLflow runs, flush the spool. Installing the server adds serve, migrate, "
    "demo and token."
)


def add_spool_parser(sub: Any) -> None:
    spool = sub.add_parser("spool", help="runs kept on disk while the server was unreachable")
    ssub = spool.add_subparsers(dest="spool_command", required=True)
    flush = ssub.add_parser(
        "flush",
        help="post the spooled runs (each stored once, however often this runs)",
        description="Post every run track_run spooled, oldest first, and delete each "
        "file once stored. Runs the server refuses are moved to the spool's rejected/ "
        "folder with the reason. Exit codes: 0 all sent, 1 some refused, 2 usage, "
        "5 server unavailable (the rest kept).",
    )
    _connection_args(flush, "an ingest token (default: $CADENCE_TOKEN; required)")
    flush.add_argument(
        "--dir", help="the spool directory (default: $CADENCE_SPOOL_DIR, else the user cache)"
    )
    flush.set_defaults(func=run_spool_flush)
    show = ssub.add_parser("list", help="the spooled runs, one line each")
    show.add_argument("--dir", help="the spool directory")
    show.set_defaults(func=run_spool_list)


def run_spool_flush(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token:
        print("cadence: no token: pass --token or set CADENCE_TOKEN", file=sys.stderr)
        return USAGE
    spool = Spool(args.dir)
    waiting = len(spool.files())
    with client_for(args, token, transport, sleep) as client:
        done = spool.flush(client)
    print(
        f"spool {spool.directory}: {waiting} file(s); {done.stored} run(s) stored "
        f"({done.created} created, {done.existing} already there), "
        f"{len(done.rejected)} file(s) refused, {done.remaining} left"
    )
    for path in done.rejected:
        print(f"cadence: refused, moved to {path}", file=sys.stderr)
    if done.error:
        print(f"cadence: stopped: {done.error}", file=sys.stderr)
        return UNAVAILABLE
    return 1 if done.rejected else OK


def run_spool_list(args: argparse.Namespace) -> int:
    spool = Spool(args.dir)
    for run in spool.pending():
        print(
            f"{run.get('pipeline')}/{run.get('run_id')} "
            f"{run.get('outcome', 'succeeded')} {run.get('finished_at')}"
        )
    return OK


BUILTIN: tuple[AddParsers, ...] = (
    report.add_parsers,  # report
    export.add_parser,  # export
    evaluations.add_parser,  # report-evaluations
    check.add_parser,  # check
    plan.add_parser,  # plan
    mlflow_command.add_parsers,  # import mlflow
    add_spool_parser,  # spool flush, spool list
)


def parser(extensions: Sequence[AddParsers] | None = None) -> argparse.ArgumentParser:
    """Every command: this distribution's, then the extensions (by default those the
    installed distributions register in ``cadence.commands``)."""
    p = argparse.ArgumentParser(prog="cadence", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in BUILTIN:
        add(sub)
    for add in extensions if extensions is not None else _discovered():
        add(sub)
    return p


def _discovered() -> list[AddParsers]:
    found = []
    for ep in entry_points(COMMANDS):
        try:
            found.append(ep.load())
        except Exception as exc:  # a broken extension must not take the client's commands
            print(f"cadence: extension {ep.name!r} ({ep.value}) not loaded: {exc}", file=sys.stderr)
    return found


def main(argv: Sequence[str] | None = None, extensions: Sequence[AddParsers] | None = None) -> int:
    args = parser(extensions).parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
