"""What one invocation measures, and how much of it (full run or --quick)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = ("ingest", "baseline", "analytics", "org", "client", "sources", "bill")
DEFAULT_PHASES = ("ingest", "baseline", "analytics", "client", "sources", "bill")
BACKENDS = ("postgresql", "sqlite")


@dataclass
class Config:
    quick: bool = False
    phases: tuple[str, ...] = DEFAULT_PHASES
    workers: int = 2
    repeat: int = 3
    backends: tuple[str, ...] = BACKENDS
    rebuild: bool = False
    pg: str = "postgresql://postgres@127.0.0.1:5432"
    batch_concurrency: int = 2
    results_dir: Path = REPO / "bench" / "results"
    ingest_db: str = "cadence_bench"
    sqlite_path: Path = REPO / "var" / "bench.db"
    # (requests or batches, time limit in seconds): every load stops at whichever comes first
    single_c1: tuple[int, float] = (1000, 30.0)
    single_c16: tuple[int, float] = (8000, 60.0)
    batch100: tuple[int, float] = (200, 40.0)
    batch1000: tuple[int, float] = (50, 75.0)
    raw_limit_s: float = 60.0
    healthz: int = 200
    # analytics: timed requests per endpoint, untimed warm-ups, time limit per endpoint
    reads: tuple[int, int, float] = (50, 3, 60.0)
    dataset_runs: int = 1_000_000
    # org phase: runs over 5,000 pipelines; --before: older code timed on the same data
    org_runs: int = 10_000_000
    before: Path | None = None
    cold_starts: int = 5  # org phase: fresh servers whose first portfolio read is timed
    # sources phase: its own database, dropped and made anew each run
    sources_db: str = "cadence_bench_sources"
    notes: list[str] = field(default_factory=list)

    @property
    def analytics_db(self) -> str:
        return "cadence_bench_1m" if self.dataset_runs == 1_000_000 else "cadence_bench_100k"


def quick_sizes(cfg: Config) -> Config:
    """A smoke run under two minutes: small counts, one repeat, 100k-run analytics DB
    unless the 1M one already exists (then that one is used: it costs nothing to reuse)."""
    cfg.single_c1 = (200, 10.0)
    cfg.single_c16 = (1000, 15.0)
    cfg.batch100 = (10, 10.0)
    cfg.batch1000 = (5, 15.0)
    cfg.raw_limit_s = 15.0
    cfg.healthz = 50
    cfg.reads = (10, 2, 15.0)
    cfg.repeat = 1
    cfg.cold_starts = 1
    return cfg
