"""Optional GPU utilization sampling through NVML (``pip install cadence-gpu-client[nvml]``).

``nvidia-ml-py`` provides the ``pynvml`` module. The sampler reads each visible GPU's
``utilization.gpu`` (percent of the last sample period in which a kernel ran: NVML's
"GPU utilization", not SM occupancy) every ``interval`` seconds on a daemon thread, and
reports the mean over samples and GPUs as a fraction. Without the library, or without
a GPU, it does nothing and says why in ``status`` and one log line.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from typing import Any

log = logging.getLogger("cadence_client")


class NvmlSampler:
    def __init__(self, interval: float = 5.0, nvml: Any = None) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self._nvml = nvml
        self._handles: list[Any] = []
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.status = "not started"

    @property
    def active(self) -> bool:
        return bool(self._handles)

    @property
    def samples(self) -> list[float]:
        with self._lock:
            return list(self._samples)

    def start(self) -> bool:
        """Open NVML and start sampling; False (and a log line) when it cannot."""
        try:
            nvml = self._nvml or importlib.import_module("pynvml")
        except ImportError:
            return self._unavailable(
                "NVML not installed (pip install cadence-gpu-client[nvml]); utilization not sampled"
            )
        self._nvml = nvml
        try:
            nvml.nvmlInit()
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            return self._unavailable(f"no GPU found ({exc}); utilization not sampled")
        if not self._handles:
            self._shutdown()
            return self._unavailable("no GPU found (NVML sees 0 devices); utilization not sampled")
        self.status = f"sampling {len(self._handles)} GPU(s) every {self.interval:g} s"
        log.info("cadence: %s", self.status)
        self.sample_once()  # at least one sample, however short the run
        self._thread = threading.Thread(target=self._loop, name="cadence-nvml", daemon=True)
        self._thread.start()
        return True

    def sample_once(self) -> float | None:
        """One reading: the mean ``utilization.gpu`` of all GPUs, as a fraction."""
        if not self._handles:
            return None
        try:
            values = [float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles]
        except Exception as exc:  # a GPU fell off the bus: keep what we have
            log.warning("cadence: NVML sample failed: %s", exc)
            return None
        value = min(1.0, max(0.0, sum(values) / len(values) / 100.0))
        with self._lock:
            self._samples.append(value)
        return value

    def stop(self) -> float | None:
        """Stop sampling; the mean of the samples (None when nothing was sampled)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.interval + 5)
            self._thread = None
        if self._handles:
            self.sample_once()
            self._shutdown()
            self._handles = []
        samples = self.samples
        return sum(samples) / len(samples) if samples else None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample_once()

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):  # already gone; nothing to release
            self._nvml.nvmlShutdown()

    def _unavailable(self, reason: str) -> bool:
        self.status = reason
        log.warning("cadence: %s", reason)
        return False
