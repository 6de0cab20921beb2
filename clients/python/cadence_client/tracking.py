"""``client.track_run(...)``: record one training run around the code that does it."""

from __future__ import annotations

import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from cadence_client.errors import CadenceClientError
from cadence_client.nvml import NvmlSampler

if TYPE_CHECKING:
    from cadence_client.client import CadenceClient

log = logging.getLogger("cadence_client")

OUTCOME_TAG = "cadence_outcome"
ERROR_TAG = "cadence_error"
# Set by the tracker itself: the job cannot override them with set().
MANAGED = frozenset({"pipeline", "run_id", "started_at", "finished_at"})


class TrackedRun:
    """One run being recorded; ``run.set(...)`` adds or changes its fields.

    On exit the run is posted with ``finished_at`` = now. When the job raised, the run
    is posted with the tag ``cadence_outcome=failed`` (and ``cadence_error`` = the
    exception's type) and the job's exception propagates unchanged: a failure to post
    then is logged, never raised in its place. When the job succeeded, a failure to post
    raises (the run was not recorded, and the job should know).
    """

    def __init__(
        self,
        client: CadenceClient,
        fields: dict[str, Any],
        *,
        sample_gpu: bool = False,
        sample_interval: float = 5.0,
        sampler: NvmlSampler | None = None,
    ) -> None:
        self._client = client
        self.fields: dict[str, Any] = dict(fields)
        self.fields["tags"] = dict(self.fields.get("tags") or {})
        self.sampler = sampler or (NvmlSampler(sample_interval) if sample_gpu else None)
        self.result: dict[str, Any] | None = None

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

    def payload(self) -> dict[str, Any]:
        """The run as it will be (or was) posted."""
        body = dict(self.fields)
        if not body["tags"]:
            del body["tags"]
        return body

    def __enter__(self) -> TrackedRun:
        self.fields["started_at"] = self._client.now()
        if self.sampler is not None:
            self.sampler.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.fields["finished_at"] = self._client.now()
        if self.sampler is not None:
            mean = self.sampler.stop()
            if mean is not None and "gpu_utilization" not in self.fields:
                self.fields["gpu_utilization"] = mean
                self.fields.setdefault("utilization_source", "nvml_gpu_util")
        if exc_type is None:
            self.result = self._client.post_run(self.payload())
            return
        self.fields["tags"][OUTCOME_TAG] = "failed"
        self.fields["tags"][ERROR_TAG] = exc_type.__name__[:500]
        if "gpu_utilization" not in self.fields:
            log.warning(
                "run %s failed before it set gpu_utilization; not recorded",
                self.fields.get("run_id"),
            )
            return
        try:
            self.result = self._client.post_run(self.payload())
        except (CadenceClientError, ValueError) as post_error:
            log.warning("could not record failed run %s: %s", self.fields["run_id"], post_error)
        # Returning None lets the job's own exception propagate.
