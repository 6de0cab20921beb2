"""One empty-state box per missing thing on the pipeline page.

Every section says what it lacks; a pipeline without runs had fifteen boxes, most
saying "no runs yet" in other words. Walked in page order, the first box about a
missing thing stays and later ones about the same thing are dropped (their section
shows nothing). With no runs at all, every "No runs ..." box is one thing.
"""

from __future__ import annotations

from typing import Any

# Where each empty state is in the page context, in the order the page shows them.
PAGE_ORDER: tuple[tuple[str, ...], ...] = (
    ("cost",),
    ("levers_empty",),
    ("gate_empty",),
    ("value", "curve"),
    ("value", "decay"),
    ("checkpoint",),
    ("trend", "goodput"),
    ("runs_charts", "run_gpu"),
    ("trend", "week_gpu"),
    ("runs_charts", "run_usd"),
    ("trend", "week_usd"),
    ("runs_charts", "quality"),
    ("scaling",),
)


def _thing(message: str, no_runs: bool) -> str:
    """What a message says is missing: "runs" for every no-runs message of a pipeline
    without runs, else the message itself (only the same words are the same thing)."""
    return "runs" if no_runs and message.startswith("No runs") else message


def one_box_each(context: dict[str, Any], no_runs: bool) -> None:
    """Drop, in place, the empty states that repeat an earlier one's missing thing; sets
    ``runs_said`` when a box already said the pipeline has no runs (the runs table then
    says nothing more)."""
    seen: set[str] = set()
    for path in PAGE_ORDER:
        holder: Any = context
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else getattr(holder, key, None)
        last = path[-1]
        item: Any = holder.get(last) if isinstance(holder, dict) else getattr(holder, last, None)
        message = item if isinstance(item, str) else getattr(item, "empty", None)
        if not message or getattr(item, "figure", None) is not None:
            continue
        thing = _thing(message, no_runs)
        if thing not in seen:
            seen.add(thing)
        elif isinstance(item, str):
            holder[last] = None
        else:
            item.empty = None
    context["runs_said"] = "runs" in seen
