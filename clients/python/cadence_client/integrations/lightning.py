"""PyTorch Lightning: ``Trainer(callbacks=[CadenceCallback(run)])`` inside
``with cadence.track_run(...) as run:``.

Data stall is the time from one training batch's end to the next one's start (Lightning
fetches the next batch there), less validation and checkpoint writes that fall in that
gap; checkpoint time is the strategy's ``checkpoint_io.save_checkpoint``, the blocking
write. Both are measured on global rank 0 only (see ``cadence_client.timing``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

if TYPE_CHECKING:
    from cadence_client.tracking import TrackedRun


class CadenceCallback(Callback):  # type: ignore[misc]
    def __init__(self, run: TrackedRun) -> None:
        super().__init__()
        self.run = run
        self._since: float | None = None  # the last batch's end
        self._excluded = 0.0  # validation and checkpoint time since then
        self._paused: float | None = None
        self._save: Any = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        io = trainer.strategy.checkpoint_io
        save = self._save = io.save_checkpoint

        def timed_save(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return save(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                self._excluded += took
                if trainer.is_global_zero:
                    self.run.watch.add_checkpoint(took)

        io.save_checkpoint = timed_save

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self._save is not None:
            trainer.strategy.checkpoint_io.save_checkpoint = self._save
            self._save = None

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._mark()  # the epoch's first fetch (workers starting) is a stall too

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, index: int) -> None:
        if self._since is not None and trainer.is_global_zero:
            waited = time.perf_counter() - self._since - self._excluded
            self.run.watch.add_stall(max(0.0, waited))
        self._since = None

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, index: int
    ) -> None:
        self._mark()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._paused = time.perf_counter()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._paused is not None:
            self._excluded += time.perf_counter() - self._paused
            self._paused = None

    def _mark(self) -> None:
        self._since, self._excluded = time.perf_counter(), 0.0
