"""Report training runs to Cadence from a training job.

    from cadence_client import CadenceClient

    with CadenceClient("http://127.0.0.1:8000", token="cad_...") as cadence:
        with cadence.track_run(pipeline="recsys-ranker", run_id="2026-11-30", workers=8) as run:
            for batch in run.timed(loader):  # time waiting in next() is data stall
                step(batch)
            with run.checkpointing():
                save()
            run.set(gpu_utilization=0.71, quality_value=0.43)

Depends on httpx only; Python 3.9+.
"""

from cadence_client.client import UTILIZATION_SOURCES, BatchResult, CadenceClient, __version__
from cadence_client.errors import (
    AuthError,
    CadenceAPIError,
    CadenceClientError,
    ConflictError,
    ServiceUnavailable,
    ValidationFailed,
)
from cadence_client.nvml import NvmlSampler
from cadence_client.spool import FlushResult, Spool
from cadence_client.tracking import TrackedRun

__all__ = [
    "UTILIZATION_SOURCES",
    "AuthError",
    "BatchResult",
    "CadenceAPIError",
    "CadenceClient",
    "CadenceClientError",
    "ConflictError",
    "FlushResult",
    "NvmlSampler",
    "ServiceUnavailable",
    "Spool",
    "TrackedRun",
    "ValidationFailed",
    "__version__",
]
