"""Per-key throttles held in one small bounded structure per process.

A :class:`Throttle` counts events (a wrong sign-in token from a client, a test send of
an alert rule) in a sliding minute, per key, in an LRU dict of at most ``keys`` keys each
holding at most ``limit`` timestamps: memory is bounded by keys x limit floats whatever
an attacker sends (10,000 clients x 10 failures: ~1 MB). A key evicted to make room
starts afresh, so the bound is what a flood of fresh addresses can buy, never memory.
State is per process (each worker counts its own), as the token cache is.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque

WINDOW = 60.0  # seconds


class Throttle:
    def __init__(self, limit: int, keys: int = 10_000, window: float = WINDOW) -> None:
        self.limit, self.keys, self.window = limit, keys, window
        self._events: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, key: str, now: float | None = None) -> int:
        """Seconds until ``key`` may act again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            events = self._recent(key, now)
            if events is None or len(events) < self.limit:
                return 0
            return max(1, math.ceil(events[0] + self.window - now))

    def add(self, key: str, now: float | None = None) -> None:
        """Count one event of ``key`` now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            events = self._recent(key, now)
            if events is None:
                events = self._events[key] = deque(maxlen=self.limit)
                while len(self._events) > self.keys:
                    self._events.popitem(last=False)  # the least recently seen
            events.append(now)

    def _recent(self, key: str, now: float) -> deque[float] | None:
        events = self._events.get(key)
        if events is None:
            return None
        self._events.move_to_end(key)
        while events and events[0] <= now - self.window:
            events.popleft()
        return events

    def __len__(self) -> int:
        return len(self._events)
