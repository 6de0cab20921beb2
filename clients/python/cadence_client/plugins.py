"""Entry points other distributions register for the ``cadence`` command.

``cadence.commands``: ``name = module:add_parsers``, a function given the subcommand
parser (``argparse``'s ``add_subparsers()`` object) that adds its commands, each with
``set_defaults(func=handler)`` and ``handler(args) -> exit code``. The server
distribution adds ``serve``, ``migrate``, ``demo`` and ``token`` this way, so one
``cadence`` script (this distribution's) serves both installs.

``cadence.export_formats``: see ``cadence_client.commands.report``.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

COMMANDS = "cadence.commands"


def entry_points(group: str) -> list[Any]:
    """The group's entry points, one per name (Python 3.9's API and 3.10+'s)."""
    found = metadata.entry_points()
    if hasattr(found, "select"):
        items = list(found.select(group=group))
    else:  # Python 3.9: a dict of group -> entry points
        items = list(found.get(group, ()))
    # An editable install beside a regular one lists a name twice: keep the first.
    return list({ep.name: ep for ep in reversed(items)}.values())[::-1]
