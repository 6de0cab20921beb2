"""Measured badput: the time a training loop waits for data and for checkpoint writes.

``run.timed(loader)`` wraps any iterable and adds the time spent inside ``next()`` to
the data stall; ``with run.waiting_for_data():`` and ``with run.checkpointing():`` add a
block's duration. Durations are wall clock (``time.perf_counter``): Cadence's
``data_stall_hours`` and ``checkpoint_hours`` are wall-clock hours that the server
multiplies by the workers (docs/methodology.md §2), so a data-parallel job reports them
from rank 0 only, whose loop waits as long as every rank's.

``timed`` costs one ``perf_counter`` pair and a float addition per item, with no lock:
the loop that iterates is the one thread that adds to its own total (``make bench`` measures
the overhead on a loop of 1 ms steps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")
HOUR = 3600.0


class Stopwatch:
    """Seconds of data stall and of checkpointing, summed over a run."""

    def __init__(self) -> None:
        self.block_stall_seconds = 0.0
        # Added to by the loop that iterates a Timed (one thread per loader), without the
        # lock, which the loop would otherwise take for every item.
        self.loop_stall_seconds = 0.0
        self.checkpoint_seconds = 0.0
        self.measured_stall = False
        self.measured_checkpoint = False
        self._lock = threading.Lock()  # blocks may be timed from several threads

    def add_stall(self, seconds: float) -> None:
        with self._lock:
            self.block_stall_seconds += seconds
            self.measured_stall = True

    def add_checkpoint(self, seconds: float) -> None:
        with self._lock:
            self.checkpoint_seconds += seconds
            self.measured_checkpoint = True

    @contextmanager
    def waiting_for_data(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add_stall(time.perf_counter() - start)

    @contextmanager
    def checkpointing(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add_checkpoint(time.perf_counter() - start)

    @property
    def data_stall_seconds(self) -> float:
        return self.block_stall_seconds + self.loop_stall_seconds

    def hours(self) -> dict[str, float]:
        """The run fields measured so far (only those something was measured for)."""
        out: dict[str, float] = {}
        if self.measured_stall:
            out["data_stall_hours"] = self.data_stall_seconds / HOUR
        if self.measured_checkpoint:
            out["checkpoint_hours"] = self.checkpoint_seconds / HOUR
        return out


class Timed(Generic[T]):
    """An iterable whose ``next()`` time is data stall; ``len()`` passes through (for
    progress bars and Lightning), and each ``iter()`` starts a new pass (an epoch)."""

    def __init__(self, iterable: Iterable[T], watch: Stopwatch) -> None:
        self.iterable = iterable
        self._watch = watch

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[T]:
        clock = time.perf_counter
        watch = self._watch
        watch.measured_stall = True
        start = clock()
        iterator = iter(self.iterable)  # a DataLoader starts its workers here: a stall too
        watch.loop_stall_seconds += clock() - start
        while True:
            start = clock()
            try:
                item = next(iterator)
            except StopIteration:
                watch.loop_stall_seconds += clock() - start
                return
            watch.loop_stall_seconds += clock() - start
            yield item
