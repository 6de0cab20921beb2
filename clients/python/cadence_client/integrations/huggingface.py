"""Hugging Face Transformers: ``Trainer(..., callbacks=[CadenceTrainerCallback(run)])``
inside ``with cadence.track_run(...) as run:``.

The Trainer calls its callbacks around each optimizer step: after ``on_step_end`` it
logs, evaluates and saves (``on_log``, ``on_evaluate``, ``on_save`` each mark the time),
then fetches the next batches and calls ``on_step_begin``. So data stall is the time
from the last of those marks to ``on_step_begin``, and checkpoint time the time from the
mark before ``on_save`` to it (the save's blocking write). Evaluation counts as neither.
Measured on the world's process zero only (see ``cadence_client.timing``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

if TYPE_CHECKING:
    from cadence_client.tracking import TrackedRun


class CadenceTrainerCallback(TrainerCallback):  # type: ignore[misc]
    def __init__(self, run: TrackedRun) -> None:
        self.run = run
        self._since: float | None = None

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._since = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._since is not None and state.is_world_process_zero:
            self.run.watch.add_stall(time.perf_counter() - self._since)
        self._since = None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._since = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._remark()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._remark()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._since is not None and state.is_world_process_zero:
            self.run.watch.add_checkpoint(time.perf_counter() - self._since)
        self._remark()

    def _remark(self) -> None:
        if self._since is not None:
            self._since = time.perf_counter()
