"""``cadence export``: runs to CSV or JSON lines, or a format another distribution
registers.

Formats beyond ``csv`` and ``jsonl`` come from the ``cadence.export_formats`` entry-point
group: each entry is ``name = module``, a module (or object) with ``HELP`` (a few words
for ``--help``), ``add_arguments(parser)`` (its own options) and ``write(runs, out,
args) -> count``. The server distribution registers ``focus`` (FinOps FOCUS rows,
computed with its goodput arithmetic: app/reporting/focus_export.py), so ``--format
focus`` is there when the server package is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx

from cadence_client.commands.records import write_csv, write_jsonl
from cadence_client.commands.report import (
    AUTH,
    OK,
    REFUSED,
    UNREACHED,
    USAGE,
    _connection_args,
    _error,
    _runs,
    client_for,
    unreached,
)
from cadence_client.errors import AuthError, CadenceAPIError
from cadence_client.plugins import entry_points
from cadence_client.refusal import print_refusal

EXPORT_FORMATS = "cadence.export_formats"
EXPORT_EXIT_CODES = """exit codes: 0 exported, 1 refused by the server, 2 usage error,
4 authentication/authorization failed, 5 server unavailable after retries"""


def add_parser(sub: Any) -> None:
    export = sub.add_parser(
        "export",
        help="write runs as CSV or JSON lines (the columns `report` reads)",
        description="Export runs with every API field; `cadence report --file` reads "
        "the result back (read-only columns are ignored).",
        epilog=EXPORT_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_args(export, "a read token (default: $CADENCE_TOKEN; not needed in open read mode)")
    export.add_argument("--pipeline", help="only this pipeline (default: every pipeline)")
    plugins = export_formats()
    export.add_argument(
        "--format",
        choices=("csv", "jsonl", *sorted(plugins)),
        default="csv",
        help="csv or jsonl (every API field)"
        + "".join(f", or {name}: {plugin.HELP}" for name, plugin in sorted(plugins.items())),
    )
    for plugin in plugins.values():
        plugin.add_arguments(export)
    export.add_argument("--output", type=Path, help="file to write (default: stdout)")
    export.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    export.set_defaults(func=run_export)


def export_formats() -> dict[str, Any]:
    """The formats other distributions register (``cadence.export_formats``), by name;
    one that does not load is reported and left out."""
    found = {}
    for ep in entry_points(EXPORT_FORMATS):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:
            print(f"cadence: export format {ep.name!r} not loaded: {exc}", file=sys.stderr)
    return found


# export -------------------------------------------------------------------------------


def run_export(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    token = args.token or os.environ.get("CADENCE_TOKEN") or None
    write: Callable[[Iterable[dict[str, Any]], TextIO], int]
    if args.format == "csv":
        write = write_csv
    elif args.format == "jsonl":
        write = write_jsonl
    else:
        plugin = export_formats()[args.format]

        def write(runs: Iterable[dict[str, Any]], out: TextIO) -> int:
            return int(plugin.write(runs, out, args))

    try:
        with client_for(args, token, transport, sleep) as client:
            pipelines = (
                [args.pipeline]
                if args.pipeline
                else [str(p["name"]) for p in client.list_pipelines()]
            )

            def runs() -> Iterator[dict[str, Any]]:
                for name in pipelines:
                    yield from client.list_runs(pipeline=name)

            with _output(args.output) as out:
                count = write(runs(), out)
    except AuthError as exc:
        print_refusal(exc)
        return AUTH
    except CadenceAPIError as exc:
        print_refusal(exc)
        return REFUSED
    except UNREACHED as exc:
        return unreached(exc)
    except OSError as exc:
        _error(f"cannot write {args.output}: {exc.strerror or exc}")
        return USAGE
    if not args.quiet:
        target = args.output or "stdout"
        summary = f"exported {_runs(count)} of {len(pipelines)} pipeline(s) to {target}"
        print(summary, file=sys.stderr)
    return OK


@contextlib.contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    """stdout, or a temporary file beside ``path`` renamed over it only on success (a
    failed export never leaves a half-written file)."""
    if path is None:
        yield sys.stdout
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with open(fd, "w", encoding="utf-8", newline="") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
