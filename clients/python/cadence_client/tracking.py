"""``client.track_run(...)``: record one training run around the code that does it.

The start is reported on entry (``outcome: "running"``, so this month's spend counts the
run while it runs), and the finish completes it. Every outcome is recorded: the block
ending is ``succeeded``, an exception ``failed``,
KeyboardInterrupt ``cancelled``, and SIGTERM (what Kubernetes and spot reclaimers send
before killing a job) ``preempted``, posted from the signal handler at once, within the
grace period. A Cadence problem never replaces the job's own exception and never fails
a job that succeeded: a run that cannot be posted is spooled to disk (``spool.py``) and
sent by the next successful post or ``cadence spool flush``. ``strict=True`` raises
those problems instead, for CI jobs that must know.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import date, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from cadence_client.errors import ConflictError, ValidationFailed
from cadence_client.nvml import NvmlSampler
from cadence_client.spool import Spool
from cadence_client.timing import Stopwatch, Timed

if TYPE_CHECKING:
    from cadence_client.client import CadenceClient

log = logging.getLogger("cadence_client")
T = TypeVar("T")

ERROR_TAG = "cadence_error"
SUCCEEDED, FAILED, PREEMPTED, CANCELLED = "succeeded", "failed", "preempted", "cancelled"
RUNNING = "running"
# What a start report cannot carry: the server wants them with the finish.
NOT_AT_START = frozenset({"finished_at", "gpu_hours", "gpu_utilization", "outcome"})
# Set by the tracker itself: the job cannot override them with set().
MANAGED = frozenset({"pipeline", "run_id", "started_at", "finished_at", "outcome"})


class TrackedRun:
    """One run being recorded; ``run.set(...)`` adds or changes its fields.

    On exit the run is posted with ``finished_at`` = now and its outcome (see the
    module's text). ``run.result`` is the stored run, ``run.spooled`` the spool file
    when the post failed for good, ``run.outcome`` what was recorded.
    """

    def __init__(
        self,
        client: CadenceClient,
        fields: dict[str, Any],
        *,
        sample_gpu: bool = False,
        sample_interval: float = 5.0,
        sampler: NvmlSampler | None = None,
        strict: bool = False,
        spool: Spool | str | Path | None = None,
        handle_sigterm: bool = True,
        report_start: bool = True,
    ) -> None:
        self._client = client
        self.report_start = report_start
        self.start_spooled: Path | None = None
        self.fields: dict[str, Any] = dict(fields)
        self.fields["tags"] = dict(self.fields.get("tags") or {})
        self.sampler = sampler or (NvmlSampler(sample_interval) if sample_gpu else None)
        self.strict = strict
        self.spool = spool if isinstance(spool, Spool) else Spool(spool)
        self.watch = Stopwatch()
        self.result: dict[str, Any] | None = None
        self.spooled: Path | None = None
        self.outcome: str | None = None
        self._handle_sigterm = handle_sigterm
        self._previous: Any = None
        self._installed = False
        self._done = False
        self._pending: tuple[int, FrameType | None] | None = None

    def set(self, **fields: Any) -> TrackedRun:
        """Set run fields, e.g. ``run.set(gpu_utilization=0.71, quality_value=0.43)``.

        ``tags`` are merged into the run's tags; ``interruptions`` replace the list (or
        use :meth:`add_interruption`).
        """
        managed = sorted(MANAGED & set(fields))
        if managed:
            raise ValueError(f"{', '.join(managed)} are set by track_run itself")
        tags = fields.pop("tags", None)
        if tags:
            self.fields["tags"].update(tags)
        self.fields.update(fields)
        return self

    def tag(self, key: str, value: str) -> TrackedRun:
        self.fields["tags"][key] = value
        return self

    def add_interruption(
        self,
        *,
        lost_progress_hours: float = 0.0,
        resume_hours: float = 0.0,
        reschedule_hours: float = 0.0,
        cause: str | None = None,
    ) -> TrackedRun:
        """Record a failure the job recovered from (hours lost, to resume, to reschedule)."""
        item: dict[str, Any] = {
            "lost_progress_hours": lost_progress_hours,
            "resume_hours": resume_hours,
            "reschedule_hours": reschedule_hours,
        }
        if cause is not None:
            item["cause"] = cause
        self.fields.setdefault("interruptions", []).append(item)
        return self

    # -- measured badput -------------------------------------------------------------

    def timed(self, iterable: Iterable[T]) -> Timed[T]:
        """``for batch in run.timed(loader):`` counts the time spent waiting in ``next()``
        as data stall (wall clock; report from rank 0 of a data-parallel job)."""
        return Timed(iterable, self.watch)

    def waiting_for_data(self) -> AbstractContextManager[None]:
        """``with run.waiting_for_data():`` adds the block's duration to the data stall."""
        return self.watch.waiting_for_data()

    def checkpointing(self) -> AbstractContextManager[None]:
        """``with run.checkpointing():`` adds the block's duration to checkpoint_hours."""
        return self.watch.checkpointing()

    def payload(self) -> dict[str, Any]:
        """The run as it will be (or was) posted: JSON-serialisable (datetimes as ISO
        8601 text), measured stall and checkpoint hours unless the job set its own,
        ``outcome`` only when not ``succeeded`` (servers before attempts refuse it)."""
        body = {k: _jsonable(v) for k, v in self.fields.items()}
        for name, hours in self.watch.hours().items():
            body.setdefault(name, hours)
        if not body["tags"]:
            del body["tags"]
        if self.outcome not in (None, SUCCEEDED):
            body["outcome"] = self.outcome
        return body

    # -- the block -------------------------------------------------------------------

    def start_payload(self) -> dict[str, Any]:
        """The start report: the run so far with ``outcome: "running"`` and no finish,
        billed hours or utilization (the finish brings them)."""
        body = {k: _jsonable(v) for k, v in self.fields.items() if k not in NOT_AT_START}
        if not body.get("tags"):
            body.pop("tags", None)
        body["outcome"] = RUNNING
        return body

    def _report_start(self) -> None:
        """Post the start, quickly (the job is waiting); spool it when the server cannot
        be reached. An older server answers 422 (no "running" outcome): the finish is
        then posted as before, alone. Never raises: the start is a courtesy."""
        payload = self.start_payload()
        name = f"{payload.get('pipeline')}/{payload.get('run_id')}"
        try:
            with self._client.hurried():
                self._client.post_run(payload)
        except ValidationFailed as exc:
            log.info("cadence: the server does not take a start report for %s (%s)", name, exc)
        except ConflictError as exc:
            log.warning("cadence: start of run %s refused: %s", name, exc)
        except Exception as exc:  # ServiceUnavailable, a refused token, a bad URL...
            self.start_spooled = self.spool.write([payload])
            log.warning("cadence: start of run %s not posted (%s); spooled", name, exc)

    def _drop_spooled_start(self) -> None:
        """The finish supersedes a start still waiting in the spool: sent after the
        finish, the start would be refused (a start after a finish is a 409)."""
        if self.start_spooled is not None:
            self.start_spooled.unlink(missing_ok=True)
            self.start_spooled = None

    def __enter__(self) -> TrackedRun:
        self.fields["started_at"] = self._client.now()
        if self.report_start:
            self._report_start()
        if self.sampler is not None:
            self.sampler.start()
        self._install_sigterm()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._done:  # posted when SIGTERM came
            self._restore_sigterm()
            return
        outcome = _outcome(exc)
        try:
            self._finish(outcome, exc_type if outcome != SUCCEEDED else None)
        except Exception:
            if self.strict and exc is None:
                raise
            log.exception("cadence: could not record run %s", self.fields.get("run_id"))
        finally:
            # Restored only now: a SIGTERM during the post above waited for it (see
            # _on_sigterm) and is handed on here.
            self._restore_sigterm()
            self._replay_sigterm()
        # Returning None lets the job's own exception propagate.

    def _finish(
        self, outcome: str, exc_type: type[BaseException] | None, *, hurried: bool = False
    ) -> None:
        self._done = True
        self.outcome = outcome
        self.fields["finished_at"] = self._client.now()
        if self.sampler is not None:
            mean = self.sampler.stop()
            if mean is not None and "gpu_utilization" not in self.fields:
                self.fields["gpu_utilization"] = mean
                self.fields.setdefault("utilization_source", "nvml_gpu_util")
        if exc_type is not None:
            self.fields["tags"][ERROR_TAG] = exc_type.__name__[:500]
        self._drop_spooled_start()
        self._deliver(self.payload(), hurried)

    def _deliver(self, payload: dict[str, Any], hurried: bool) -> None:
        """Post; spool when that fails for good; drain the spool after a success."""
        name = f"{payload.get('pipeline')}/{payload.get('run_id')}"
        try:
            with self._client.hurried() if hurried else nullcontext():
                self.result = self._client.post_run(payload)
        except (ValidationFailed, ConflictError) as exc:
            # Sending it again would be refused again: say so, with what was refused.
            log.error("cadence: run %s refused, not recorded: %s; run: %s", name, exc, payload)
            if self.strict:
                raise
            return
        except Exception as exc:  # ServiceUnavailable, a refused token, a bad URL...
            self.spooled = self.spool.write([payload])
            log.warning(
                "cadence: run %s not posted (%s); spooled to %s, sent by the next "
                "successful post or `cadence spool flush`",
                name,
                exc,
                self.spooled,
            )
            if self.strict:
                raise
            return
        if not hurried and self.spool.files():
            try:
                done = self.spool.flush(self._client)
                log.info(
                    "cadence: sent %d spooled run(s) from %s", done.stored, self.spool.directory
                )
            except Exception as exc:  # the spool is retried next time; never fail the job
                log.warning("cadence: could not flush the spool %s: %s", self.spool.directory, exc)

    # -- SIGTERM -----------------------------------------------------------------------

    def _install_sigterm(self) -> None:
        # Python runs signal handlers in the main thread only, and only it may set them.
        if not self._handle_sigterm or threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._installed = True

    def _restore_sigterm(self) -> None:
        if self._installed:
            self._installed = False
            previous = self._previous if self._previous is not None else signal.SIG_DFL
            signal.signal(signal.SIGTERM, previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self._done:
            # The block is ending and its post is under way in the code this handler
            # interrupted: dying now would lose it. Hand the signal on once it is done.
            self._pending = (signum, frame)
            return
        try:
            self._finish(PREEMPTED, None, hurried=True)
        except Exception:
            log.exception("cadence: could not record preempted run %s", self.fields["run_id"])
        self._pending = (signum, frame)
        self._restore_sigterm()
        self._replay_sigterm()

    def _replay_sigterm(self) -> None:
        """Hand a SIGTERM we caught to the handler installed before ours, or to the
        default action: die of the signal, as the job would have without Cadence."""
        if self._pending is None:
            return
        (signum, frame), self._pending = self._pending, None
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            os.kill(os.getpid(), signum)


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return SUCCEEDED
    if isinstance(exc, KeyboardInterrupt):
        return CANCELLED
    if isinstance(exc, SystemExit) and exc.code in (None, 0):
        return SUCCEEDED  # sys.exit(0) inside the block: a clean finish
    return FAILED


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if not isinstance(value, (str, bytes, int, float)) and callable(getattr(value, "item", None)):
        return value.item()  # a numpy scalar or a one-element tensor (an averaged metric)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
