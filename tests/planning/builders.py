"""Small builders and hypothesis strategies for the planning tests."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from app.planning.model import Interruption, RunFacts

# Deterministic property tests: same examples every run, no example database on disk.
PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=80,
    suppress_health_check=[HealthCheck.too_slow],
)


def make_run(**overrides: Any) -> RunFacts:
    """The DOMAIN.md worked-example baseline run (8 x 14 h, 38%, $2/GPU-h) with overrides."""
    fields: dict[str, Any] = {
        "workers": 8,
        "wall_clock_hours": 14.0,
        "gpu_hours": 112.0,
        "gpu_utilization": 0.38,
        "price_per_gpu_hour": 2.0,
    }
    fields.update(overrides)
    if "gpu_hours" not in overrides and ("workers" in overrides or "wall_clock_hours" in overrides):
        fields["gpu_hours"] = fields["workers"] * fields["wall_clock_hours"]
    return RunFacts(**fields)


hours = st.floats(min_value=0.0, max_value=50.0, allow_nan=False, allow_infinity=False)
fractions = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)

interruptions = st.builds(Interruption, hours, hours, hours)


@st.composite
def runs(draw: st.DrawFn, *, with_quality: bool = False) -> RunFacts:
    """Arbitrary valid runs, including ones whose named badput exceeds their idle time."""
    workers = draw(st.integers(min_value=1, max_value=512))
    wall = draw(st.floats(min_value=0.1, max_value=200.0, allow_nan=False))
    shrink = draw(st.floats(min_value=0.5, max_value=1.0))
    return RunFacts(
        workers=workers,
        wall_clock_hours=wall,
        gpu_hours=workers * wall * shrink,
        gpu_utilization=draw(fractions),
        price_per_gpu_hour=draw(st.floats(min_value=0.0, max_value=20.0)),
        data_stall_hours=draw(hours),
        checkpoint_hours=draw(hours),
        scheduling_wait_hours=draw(hours),
        mfu=draw(st.none() | fractions),
        interruptions=tuple(draw(st.lists(interruptions, max_size=3))),
        quality_value=draw(st.floats(0.0, 1.0)) if with_quality else None,
    )
