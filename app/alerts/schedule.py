"""When an alert webhook is sent: pure functions of times, no database, no HTTP.

- Flapping: at most one notification per rule per ``min_interval``. A state change
  within the interval waits for it; a change back before it went cancels it (the
  receiver already knows that state), so the latest state is what the receiver hears.
- Retries: after the n-th failed attempt the next waits ``base x 2^(n-1)``; a
  notification is given up when its next attempt would fall more than 24 h after it
  was first due.
"""

from __future__ import annotations

from datetime import datetime, timedelta

RETRY_WINDOW = timedelta(hours=24)


def first_due(now: datetime, last_scheduled: datetime | None, min_interval: float) -> datetime:
    """When a new notification of a rule may go, given when its previous one could."""
    if last_scheduled is None:
        return now
    return max(now, last_scheduled + timedelta(seconds=min_interval))


def retry_delay(failed_attempts: int, base_seconds: float) -> timedelta:
    """The wait after ``failed_attempts`` (>= 1) failures: base, 2 x base, 4 x base ..."""
    return timedelta(seconds=base_seconds * 2 ** (failed_attempts - 1))


def next_attempt(
    first: datetime, now: datetime, failed_attempts: int, base_seconds: float
) -> datetime | None:
    """When to try again after a failure at ``now``; None: give up (past the window)."""
    at = now + retry_delay(failed_attempts, base_seconds)
    return at if at - first <= RETRY_WINDOW else None
