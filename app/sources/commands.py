"""The sources' CLI: ``cadence import slurm|kubernetes`` and ``cadence enrich prometheus``."""

from __future__ import annotations

import argparse
from typing import Any

from app.sources import enrich_command, kubernetes_command, slurm_command


def add_parsers(sub: Any) -> None:
    """Register the importers under ``cadence import``, which mlflow_import creates."""
    imports = sub.choices["import"]
    # argparse keeps a parser's subcommands in its one _SubParsersAction; it has no
    # public accessor, and a second add_subparsers() call is refused.
    isub = next(a for a in imports._actions if isinstance(a, argparse._SubParsersAction))
    slurm_command.add_parser(isub)
    kubernetes_command.add_parser(isub)
    enrich_command.add_parser(sub)
