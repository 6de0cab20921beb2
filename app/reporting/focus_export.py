"""``cadence export --format focus``, as the client's export command finds it: the
``cadence.export_formats`` entry point in pyproject.toml names this module (HELP,
add_arguments, write; see ``cadence_client.commands.export``). The rows are
``focus.py``'s."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from app.reporting.focus import DEFAULT_VERSION, VERSIONS, write_focus

HELP = "FinOps FOCUS allocation rows (docs/finops.md)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--focus-version",
        choices=VERSIONS,
        default=DEFAULT_VERSION,
        help=f"--format focus: the FOCUS version's columns (default {DEFAULT_VERSION})",
    )
    parser.add_argument(
        "--provider",
        default="Unknown",
        help="--format focus: ProviderName, PublisherName and InvoiceIssuerName, as the "
        "cloud's own export spells it (AWS, Microsoft, Google Cloud)",
    )


def write(runs: Iterable[Mapping[str, Any]], out: TextIO, args: argparse.Namespace) -> int:
    return write_focus(runs, out, provider=args.provider, version=args.focus_version)
