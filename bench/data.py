"""Ingestion records: one formula, written twice (Python and wrk's Lua), for run number i.

Run i is a README-like record (8 or 16 workers, 10-18 h, utilization 0.30-0.70, stall,
checkpoint and scheduling hours, a preemption in every fifth run, two tags), in one of
50 pipelines, with run_id "<prefix>-<i>" so that every phase and repeat is unique.
The JSON bytes are the same whichever language builds them, and `db_rows` gives the
columns Cadence stores for that body, for the raw psycopg baseline.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

PIPELINES = 50
BASE_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z; run i starts i x 10 minutes later
GPU_TYPE = "A100-80GB"
INTERRUPTION = (0.5, 0.25, 0.3, "preemption")

BODY_FORMAT = (
    '{"pipeline":"bench-%02d","run_id":"%s-%d","variant":"%s",'
    '"started_at":"%s","finished_at":"%s","workers":%d,"gpu_type":"A100-80GB",'
    '"gpu_utilization":%.2f,"quality_metric":"ndcg@10","quality_value":%.3f,'
    '"data_stall_hours":%.1f,"checkpoint_hours":1.2,"scheduling_wait_hours":0.4,'
    '"interruptions":[%s],"tags":{"git_sha":"%07x","team":"bench"}}'
)
INTERRUPTION_JSON = (
    '{"lost_progress_hours":0.5,"resume_hours":0.25,"reschedule_hours":0.3,"cause":"preemption"}'
)


def pipeline_name(n: int) -> str:
    return f"bench-{n:02d}"


def _params(i: int) -> dict[str, Any]:
    start = BASE_EPOCH + i * 600
    hours = 10 + i % 9
    return {
        "pipeline": i % PIPELINES,
        "variant": "candidate" if i % 4 == 3 else "baseline",
        "start": start,
        "end": start + hours * 3600,
        "hours": hours,
        "workers": 8 if i % 2 == 0 else 16,
        "utilization": 0.30 + (i % 41) / 100,
        "quality": 0.40 + (i % 17) / 1000,
        "stall": (i % 5) * 0.5,
        "interrupted": i % 5 == 0,
        "sha": (i * 2654435761) % 268435456,
    }


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def body(prefix: str, i: int) -> str:
    p = _params(i)
    return BODY_FORMAT % (
        p["pipeline"],
        prefix,
        i,
        p["variant"],
        _iso(p["start"]),
        _iso(p["end"]),
        p["workers"],
        p["utilization"],
        p["quality"],
        p["stall"],
        INTERRUPTION_JSON if p["interrupted"] else "",
        p["sha"],
    )


def batch_body(prefix: str, first: int, count: int) -> bytes:
    return (
        '{"runs":[' + ",".join(body(prefix, i) for i in range(first, first + count)) + "]}"
    ).encode()


# Every bench pipeline's price (USD per GPU-hour): ensure_pipelines and the analytics
# dataset create them with it, and the server's default for auto-created ones is the same.
PIPELINE_PRICE = 2.5

RUN_COLUMNS = (
    "pipeline_id",
    "run_id",
    "variant",
    "started_at",
    "finished_at",
    "workers",
    "gpu_type",
    "gpu_hours",
    "gpu_utilization",
    "price_per_gpu_hour",
    "billed_price_per_gpu_hour",
    "quality_metric",
    "quality_value",
    "data_stall_hours",
    "checkpoint_hours",
    "scheduling_wait_hours",
    "mfu",
    "tags",
    "interruption_count",
    "lost_progress_hours",
    "resume_hours",
    "reschedule_hours",
    "outcome",
    "retraining_id",
    "resumed_from_hours",
)
INTERRUPTION_COLUMNS = (
    "run_pk",
    "position",
    "lost_progress_hours",
    "resume_hours",
    "reschedule_hours",
    "cause",
)


def db_rows(prefix: str, i: int, pipeline_ids: dict[str, int]) -> tuple[tuple[Any, ...], bool]:
    """(run row in RUN_COLUMNS order, has one interruption) as Cadence would store body(i)."""
    p = _params(i)
    # Values parsed back from the body's text, so floats match what the API stores.
    parsed = json.loads(body(prefix, i))
    lost, resume, resched, _ = INTERRUPTION if p["interrupted"] else (0.0, 0.0, 0.0, None)
    row = (
        pipeline_ids[pipeline_name(p["pipeline"])],
        parsed["run_id"],
        parsed["variant"],
        datetime.fromtimestamp(p["start"], UTC),
        datetime.fromtimestamp(p["end"], UTC),
        p["workers"],
        GPU_TYPE,
        float(p["workers"] * p["hours"]),
        parsed["gpu_utilization"],
        None,
        PIPELINE_PRICE,  # frozen at ingest: the run gives none, so the pipeline's
        "ndcg@10",
        parsed["quality_value"],
        parsed["data_stall_hours"],
        1.2,
        0.4,
        None,
        json.dumps(parsed["tags"]),
        1 if p["interrupted"] else 0,
        lost,
        resume,
        resched,
        "succeeded",
        parsed["run_id"],  # what the API stores when a run names no retraining
        0.0,  # no attempt resumes from another's checkpoint here
    )
    return row, bool(p["interrupted"])


def interruption_row(run_pk: int) -> tuple[Any, ...]:
    return (run_pk, 0, *INTERRUPTION)


LUA_BODY = r"""
local BODY_FORMAT = '%s'
local INTERRUPTION_JSON = '%s'
local function iso(epoch) return os.date("!%%Y-%%m-%%dT%%H:%%M:%%S+00:00", epoch) end
local function run_body(prefix, i)
  local start = %d + i * 600
  local hours = 10 + i %% 9
  local variant = "baseline"
  if i %% 4 == 3 then variant = "candidate" end
  local workers = 16
  if i %% 2 == 0 then workers = 8 end
  local interruptions = ""
  if i %% 5 == 0 then interruptions = INTERRUPTION_JSON end
  return string.format(BODY_FORMAT, i %% %d, prefix, i, variant, iso(start),
    iso(start + hours * 3600), workers, 0.30 + (i %% 41) / 100, 0.40 + (i %% 17) / 1000,
    (i %% 5) * 0.5, interruptions, (i * 2654435761) %% 268435456)
end
"""


def lua_body_function() -> str:
    """The Lua twin of `body` (a `run_body(prefix, i)` local function)."""
    return LUA_BODY % (BODY_FORMAT, INTERRUPTION_JSON, BASE_EPOCH, PIPELINES)
