"""Sources phase: `cadence import slurm` of 100,000 accounting records and `cadence enrich
prometheus` of 10,000 runs, each timed end to end as a user runs it (a subprocess against
a server on PostgreSQL). Targets (issue 26): each under a minute.

The sacct file is generated in `sacct -P` form (one job line and one step line with
gres/gpuutil per record). The Prometheus data is backfilled with Debian's `promtool tsdb
create-blocks-from openmetrics`: two GPUs per enriched run, both DCGM metrics, a sample
every 5 minutes over the run's hour. Then Debian's `prometheus` serves it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench import procs
from bench.config import REPO, Config
from bench.ingest import failure
from bench.procs import say
from bench.server import (
    Server,
    cadence_command,
    cadence_env,
    create_database,
    create_token,
    free_port,
    migrate,
    sqlalchemy_url,
)

WORK = REPO / "var" / "bench-sources"
HEADER = (
    "JobIDRaw|JobID|JobName|Account|Cluster|Partition|User|State|Submit|Eligible|Start|End|"
    "AllocTRES|TRESUsageInAve"
)
STEP = timedelta(minutes=1)  # between two jobs' starts
TARGET_S = 60.0


def first_start(records: int) -> datetime:
    """Early enough that the last job ends a day before now (the server refuses runs
    from more than 24 h ahead of its clock)."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - records * STEP - timedelta(days=2)


def sacct_file(path: Path, records: int, enriched: int, t0: datetime) -> None:
    """`records` jobs of one hour each, 4 GPUs, the first `enriched` in account bench-dcgm."""
    lines = [HEADER]
    for i in range(records):
        start = t0 + i * STEP
        submit, end = start - timedelta(minutes=3), start + timedelta(hours=1)
        account = "bench-dcgm" if i < enriched else f"bench-{i % 20}"
        t = [x.strftime("%Y-%m-%dT%H:%M:%S") for x in (submit, submit, start, end)]
        state = "COMPLETED" if i % 10 else "FAILED"
        lines.append(
            f"{i + 1}|{i + 1}|train|{account}|bench|gpu|u|{state}|{'|'.join(t)}|"
            "billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,node=1|"
        )
        lines.append(
            f"{i + 1}.0|{i + 1}.0|python|{account}|bench|||{state}|{'|'.join(t)}|"
            f"cpu=4,gres/gpu=4|cpu=00:10:00,gres/gpuutil={40 + i % 50}"
        )
    path.write_text("\n".join(lines) + "\n")


def openmetrics_file(path: Path, runs: int, t0: datetime) -> None:
    """Both DCGM metrics for the enriched runs' GPUs (job_id label = the Slurm job id)."""
    out: list[str] = []
    for metric, value in (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5), ("DCGM_FI_DEV_GPU_UTIL", 70.0)):
        out.append(f"# TYPE {metric} gauge")
        for i in range(runs):
            start = t0 + i * STEP
            for gpu in (0, 1):
                labels = f'{{job_id="{i + 1}",gpu="{gpu}",Hostname="node-{i % 64}"}}'
                for minute in range(0, 60, 5):
                    ts = (start + timedelta(minutes=minute)).timestamp()
                    out.append(f"{metric}{labels} {value} {ts:.0f}")
    out.append("# EOF")
    path.write_text("\n".join(out) + "\n")


def _timed(name: str, argv: list[str], env: dict[str, str], count: int) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [*cadence_command(), *argv], env=env, capture_output=True, text=True, timeout=900
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"`cadence {argv[0]} {argv[1]}` exited {done.returncode}: {tail}")
    status = "met" if seconds < TARGET_S else "MISSED"
    last = (done.stdout.strip().splitlines() or [""])[-1]
    say(f"  {name}: {seconds:.1f} s ({count / seconds:,.0f}/s) {status}; {last}")
    return {
        "group": "sources",
        "name": name,
        "seconds": round(seconds, 2),
        "per_s": round(count / seconds),
        "target": f"< {TARGET_S:.0f} s",
        "status": status,
        "said": last,
    }


def _prometheus(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = WORK / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1h}\nscrape_configs: []\n")
    proc = subprocess.Popen(
        [
            "prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(WORK / "prometheus.log").open("w"),
        start_new_session=True,
    )  # fmt: skip
    procs.register(proc)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("prometheus did not become ready in 120 s")


def run_sources(cfg: Config, out: list[dict[str, Any]]) -> None:
    records, enriched = (10_000, 1_000) if cfg.quick else (100_000, 10_000)
    say(f"\n== sources: import {records:,} Slurm records, enrich {enriched:,} runs ==")
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        out.append({"group": "setup", "name": "sources", "error": "apt-get install prometheus"})
        return
    try:
        WORK.mkdir(parents=True, exist_ok=True)
        create_database(cfg.pg, cfg.sources_db, drop_first=True)
        url = sqlalchemy_url(cfg.pg, cfg.sources_db)
        migrate(cadence_env(url, 8000, 1))
        token = create_token(cadence_env(url, 8000, 1), "admin")
        t0 = first_start(records)
        sacct_file(WORK / "sacct.txt", records, enriched, t0)
        openmetrics_file(WORK / "dcgm.om", enriched, t0)
        data = WORK / "tsdb"
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(WORK / "dcgm.om"),
             str(data)], check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        prom, prom_url = _prometheus(data)
        with Server(url, cfg.workers, "sources") as srv:
            env = {**cadence_env(url, 8000, 1), "CADENCE_URL": srv.url, "CADENCE_TOKEN": token}
            slurm = ["import", "slurm", "--file", str(WORK / "sacct.txt"), "--pipeline-from",
                     "account"]  # fmt: skip
            out.append(_timed(f"import slurm, {records:,} records", slurm, env, records))
            out.append(
                _timed(f"import slurm again, {records:,} (stores none)", slurm, env, records)
            )
            match = 'job_id="{slurm_job_id}"'
            enrich = ["enrich", "prometheus", "--prometheus-url", prom_url, "--match", match,
                      "--pipeline", "bench-dcgm", "--overwrite"]  # fmt: skip
            out.append(_timed(f"enrich prometheus, {enriched:,} runs", enrich, env, enriched))
        prom.terminate()
        prom.wait(timeout=30)
    except Exception as exc:
        out.append(failure("sources", "postgresql", "sources", 0, exc))
        say(f"  sources FAILED: {out[-1]['error']}")
