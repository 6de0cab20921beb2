"""``cadence import focus FILE...``: store the GPU line items of cloud FOCUS exports.

Each file is read and checked whole before anything of it is stored, then stored in one
transaction: a file that fails stores nothing (the others still do), and one charge is
stored once whatever the export (its identity is the charge's resource, accounts,
category, commitment, SKU and period; an import that restates stored periods in another
shape replaces them, and says so). The command
talks to the database, as ``cadence demo`` does: bills are large, and no API token
should be able to rewrite what finance reconciles against.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.billing import service
from app.billing.reader import BillFile
from app.billing.stream import BillError
from app.db.engine import Database, make_database
from app.settings import Settings

OK, BAD_FILE = 0, 1
EXIT_CODES = """exit codes:
  0  every file imported (rows already stored count as imported)
  1  at least one file refused: its message names the file, row and column, and
     nothing of that file was stored"""


def add_parsers(sub: Any) -> None:
    """Register ``import focus`` under ``cadence import`` (made here if no one has yet)."""
    imports = _import_subparsers(sub)
    p = imports.add_parser(
        "focus",
        help="import a cloud bill (FOCUS 1.0 to 1.2, CSV or Parquet) for the reconciliation",
        description="Store the GPU line items of AWS, Azure or Google Cloud FOCUS exports, "
        "then see each pipeline's billed, explained and unexplained GPU spend on its page "
        "and at /api/v1/pipelines/{name}/reconciliation (docs/finops.md).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".csv or .parquet")
    p.set_defaults(func=lambda settings, args: run_import(settings, args.files))


def _import_subparsers(sub: Any) -> Any:
    parent = sub.choices.get("import")
    if parent is None:
        parent = sub.add_parser("import", help="import runs or bills from other tools")
    for action in parent._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parent.add_subparsers(dest="import_source", required=True)


def run_import(settings: Settings, files: Sequence[Path], db: Database | None = None) -> int:
    own = db is None
    database = db or make_database(settings)
    try:
        return import_files(database, files)
    finally:
        if own:
            database.dispose()


def import_files(db: Database, files: Sequence[Path]) -> int:
    """Import each file on its own; print a line per file; 1 if any was refused.

    A file is read twice, streamed: once to check it whole (before any transaction),
    once to store it in one transaction; a file that changes between the two and fails
    the second read is rolled back whole. Memory holds a chunk of lines and each
    resource's span, never the file."""
    code = OK
    for path in files:
        bill = BillFile(path)
        try:
            for _ in bill.lines():
                pass
            with db.write() as session:
                imported = service.import_bill(session, bill)
        except BillError as exc:
            print(f"cadence: {exc.message}; nothing stored from it", file=sys.stderr)
            code = BAD_FILE
            continue
        print(imported.sentence())
        if bill.unknown_types:
            print(unknown_notice(bill), file=sys.stderr)
    return code


def unknown_notice(bill: BillFile) -> str:
    """The GPU-family instance types of a bill whose lines were not counted as GPU spend."""
    return (
        f"cadence: notice: {bill.source} names instance types the GPU SKU table "
        f"(app/planning/gpu_skus.py) does not know; their lines are not GPU spend: "
        + ", ".join(sorted(bill.unknown_types))
    )
