"""The rollups equal a full recomputation after any mix of ingests, deletes and price
changes (both databases), and org-wide readers that use them agree with the raw runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.db import rollup as rollups
from app.db import rollup_reads
from app.db.engine import Database
from app.db.models import Pipeline
from app.db.run_terms import goodput_totals
from app.planning.goodput import goodput_from_totals
from app.planning.rollup import GOODPUT_SUMS, SUMS, buckets, terms
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.rollups import PIPELINES, START, assert_rollups_match

VARIANTS = ("baseline", "candidate")
ids = count()


@st.composite
def runs(draw: Any) -> dict[str, Any]:
    started = START + timedelta(hours=draw(st.integers(0, 24 * 30)))
    hours = draw(st.floats(0.5, 30))
    workers = draw(st.integers(1, 16))
    interruptions = draw(
        st.lists(
            st.fixed_dictionaries({
                "lost_progress_hours": st.floats(0, hours / 8),
                "resume_hours": st.floats(0, hours / 8),
                "reschedule_hours": st.floats(0, hours / 8),
                "cause": st.just("preemption"),
            }),
            max_size=2,
        )
    )  # fmt: skip
    return make_run(
        pipeline=draw(st.sampled_from(PIPELINES)),
        run_id=f"r-{next(ids)}",
        variant=draw(st.sampled_from(VARIANTS)),
        started_at=started.isoformat(),
        finished_at=(started + timedelta(hours=hours)).isoformat(),
        workers=workers,
        # Attempts of every outcome, and some without a utilization figure.
        outcome=draw(st.sampled_from(["succeeded", "succeeded", "failed", "preempted"])),
        gpu_utilization=draw(st.none() | st.floats(0, 1)),
        price_per_gpu_hour=draw(st.none() | st.floats(0.5, 8)),
        mfu=draw(st.none() | st.floats(0, 1)),
        data_stall_hours=draw(st.floats(0, hours / 4)),
        checkpoint_hours=draw(st.floats(0, hours / 8)),
        scheduling_wait_hours=draw(st.floats(0, 3)),
        interruptions=interruptions,
    )


@st.composite
def resumed_pairs(draw: Any) -> list[dict[str, Any]]:
    """A failed or preempted attempt and a later one of the same retraining that resumed
    up to its wall clock of progress from its checkpoint."""
    first, then = draw(runs()), draw(runs())

    def hours_of(run: dict[str, Any]) -> float:
        span = datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(
            run["started_at"]
        )
        return span.total_seconds() / 3600

    first_hours, hours = hours_of(first), hours_of(then)
    started = datetime.fromisoformat(first["finished_at"]) + timedelta(hours=1)
    first["outcome"] = draw(st.sampled_from(["failed", "preempted"]))
    then.update(
        pipeline=first["pipeline"],
        retraining_id=first["run_id"],
        started_at=started.isoformat(),
        finished_at=(started + timedelta(hours=hours)).isoformat(),
        resumed_from_hours=draw(st.floats(0, first_hours)),
    )
    return [first, then]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("ingest"), st.lists(runs(), min_size=1, max_size=12)),
        # Reported at their start first (outcome "running"), then completed or left running.
        st.tuples(st.just("start"), st.lists(runs(), min_size=1, max_size=9), st.booleans()),
        st.tuples(st.just("ingest"), resumed_pairs()),
        st.tuples(st.just("each"), resumed_pairs()),
        st.tuples(st.just("delete"), st.integers(0, 1000)),
        st.tuples(st.just("price"), st.sampled_from(PIPELINES), st.floats(0.1, 9)),
        st.tuples(st.just("production"), st.sampled_from(PIPELINES), st.sampled_from(VARIANTS)),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_rollups_equal_a_recomputation(client: TestClient, db: Database, ops: list[Any]) -> None:
    # One rolled-back transaction for all examples: the invariant holds whatever came
    # before, so the examples need no clean-up between them.
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest read admin', f't{next(ids)}')}"}
    for op in ops:
        if op[0] == "ingest":
            batch = op[1]
            if len(batch) == 1:  # the single-run path (one statement on PostgreSQL)
                r = client.post("/api/v1/runs", json=batch[0], headers=headers)
            else:
                r = client.post("/api/v1/runs/batch", json={"runs": batch}, headers=headers)
            assert r.status_code in (200, 201), r.text
        elif op[0] == "start":
            _start_then_finish(client, db, headers, op[1], finish=op[2])

        elif op[0] == "each":  # one request each: the resumed attempt after the first
            for run in op[1]:
                r = client.post("/api/v1/runs", json=run, headers=headers)
                assert r.status_code == 201, r.text
        elif op[0] == "delete":
            listed = client.get("/api/v1/runs?limit=1000", headers=headers).json()["runs"]
            if listed:
                pk = listed[op[1] % len(listed)]["id"]
                assert client.delete(f"/api/v1/runs/{pk}", headers=headers).status_code == 204
        elif op[0] == "production":
            body = {"production_variant": op[2]}
            r = client.put(f"/api/v1/pipelines/{op[1]}", json=body, headers=headers)
            assert r.status_code in (200, 404), r.text  # 404: no run has created it yet
        else:
            body = {"price_per_gpu_hour": op[2]}
            r = client.put(f"/api/v1/pipelines/{op[1]}", json=body, headers=headers)
            assert r.status_code == 200, r.text
    assert_rollups_match(db)


def _start_then_finish(
    client: TestClient, db: Database, headers: dict[str, str], batch: list[Any], finish: bool
) -> None:
    """Post the runs' starts: the rollups do not move. Then, if ``finish``, their finishes:
    each start completed (200), the rollups what a recomputation makes them."""
    with db.read() as s:
        before = rollups.stored(s)
    drop = ("finished_at", "gpu_utilization", "mfu")
    starts = [
        {**{k: v for k, v in r.items() if k not in drop}, "outcome": "running"} for r in batch
    ]
    r = client.post("/api/v1/runs/batch", json={"runs": starts}, headers=headers)
    assert r.status_code == 201, r.text
    with db.read() as s:
        assert rollups.stored(s) == before  # a running attempt adds nothing
    assert_rollups_match(db)
    if finish:
        for run in batch[:1]:  # the single-run path for the first
            assert client.post("/api/v1/runs", json=run, headers=headers).status_code == 200
        if batch[1:]:
            r = client.post("/api/v1/runs/batch", json={"runs": batch[1:]}, headers=headers)
            assert r.status_code == 200 and r.json()["completed"] == len(batch) - 1, r.text


def test_a_week_across_two_months_splits_into_two_rows(client: TestClient, db: Database) -> None:
    # Monday 2026-11-30 is in November; Tuesday 2026-12-01 in December: same week.
    assert buckets(datetime(2026, 11, 30, 23, tzinfo=UTC))[1].month == 11
    assert buckets(datetime(2026, 12, 1, 1, tzinfo=UTC)) == (
        datetime(2026, 11, 30).date(), datetime(2026, 12, 1).date(),
    )  # fmt: skip
    base = {
        "variant": "baseline", "gpu_hours": 4.0, "gpu_utilization": 0.75,
        "billed_price_per_gpu_hour": 2.5, "data_stall_hours": 0.5, "checkpoint_hours": 0.0,
        "scheduling_wait_hours": 0.0, "mfu": None, "lost_progress_hours": 0.0,
        "resume_hours": 0.0, "reschedule_hours": 0.0,
    }  # fmt: skip
    start = datetime(2026, 11, 30, 8, tzinfo=UTC)
    # The worked example in app.planning.rollup.terms: 2 workers x 2 h, u = 0.75, 0.5 h
    # stall: weff = 2, idle = 1 GPU-h, all of it data stall; at $2.5: $10 spent, $2.5 of
    # it on the stall.
    one = terms({**base, "started_at": start, "finished_at": start + timedelta(hours=2)})
    assert one["g_data_stall"] == 1.0 and one["g_other_idle"] == 0.0
    assert one["program"] == 3.0 and one["cost"] == 10.0
    assert one["u_data_stall"] == 2.5
    # Stored as a batch (whose rollup rows are summed in SQL), the same two runs land in
    # one week and two months, each row holding the worked example's sums.
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest admin', 'split')}"}
    batch = [
        make_run(
            pipeline="roll-split", run_id=f"split-{day}", workers=2, gpu_hours=4.0,
            gpu_utilization=0.75, data_stall_hours=0.5, checkpoint_hours=0.0,
            scheduling_wait_hours=0.0, interruptions=[], mfu=None, price_per_gpu_hour=2.5,
            started_at=(start + timedelta(days=day)).isoformat(),
            finished_at=(start + timedelta(days=day, hours=2)).isoformat(),
        )
        for day in (0, 1)
    ]  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": batch}, headers=headers)
    assert r.status_code == 201, r.text
    with db.read() as s:
        rows = [row for row in rollups.stored(s) if row["variant"] == batch[0]["variant"]]
        pid = s.scalar(select(Pipeline.id).where(Pipeline.name == "roll-split"))
    rows = [row for row in rows if row["pipeline_id"] == pid]
    assert [(row["week_start"].day, row["month_start"].month) for row in rows] == [
        (30, 11), (30, 12),
    ]  # fmt: skip
    for row in rows:
        assert row["runs"] == 1
        for name in SUMS:
            assert abs(row[name] - one[name]) < 1e-9, name
    assert_rollups_match(db)


def test_failed_and_unmeasured_attempts_terms() -> None:
    """The worked example of app.planning.rollup.terms as attempts: 2 workers x 2 h at
    $2.5, gpu_hours 4, 0.5 h stall."""
    start = datetime(2026, 11, 30, 8, tzinfo=UTC)
    base = {
        "variant": "baseline", "gpu_hours": 4.0, "gpu_utilization": 0.75,
        "billed_price_per_gpu_hour": 2.5, "data_stall_hours": 0.5, "checkpoint_hours": 0.0,
        "scheduling_wait_hours": 0.0, "mfu": None, "lost_progress_hours": 0.0,
        "resume_hours": 0.0, "reschedule_hours": 0.0, "started_at": start,
        "finished_at": start + timedelta(hours=2),
    }  # fmt: skip
    # Failed: all 4 GPU-hours ($10) idle and under "failed", none productive, none
    # explained by the stall; held 4 GPU-h all lost (runtime 0), program 0.
    failed = terms({**base, "outcome": "failed"})
    assert failed["g_failed"] == failed["g_idle"] == 4.0 and failed["u_failed"] == 10.0
    assert failed["g_productive"] == failed["g_data_stall"] == 0.0
    assert failed["runtime_loss"] == failed["held"] == 4.0 and failed["program"] == 0.0
    assert failed["cost"] == 10.0 and failed["unmeasured"] == 0.0
    # Succeeded without utilization: spend $10, neither productive nor idle; its forward
    # progress, held 4 - loss 0 = 4 GPU-h, leaves the program factor.
    unmeasured = terms({**base, "gpu_utilization": None})
    assert unmeasured["cost"] == 10.0 and unmeasured["g_productive"] == unmeasured["g_idle"] == 0
    assert unmeasured["unmeasured"] == 4.0 and unmeasured["program"] == 0.0
    # With both beside the measured run, program goodput is the measured run's alone:
    # program 3 / (held 12 - loss 4 - unmeasured 4) = 0.75; runtime (12 - 4) / 12.
    measured = terms(base)
    total = goodput_totals(
        {"runs": 3, **{k: failed[k] + unmeasured[k] + measured[k] for k in GOODPUT_SUMS}}
    )
    got = goodput_from_totals(total)
    assert got.program == 0.75 and abs((got.runtime or 0) - 8 / 12) < 1e-12


def test_rebuilt_variant_counters_never_repeat_a_seen_value(
    client: TestClient, db: Database
) -> None:
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest read admin', 'rebuild')}"}
    batch = [make_run(pipeline=p, run_id=f"rb-{p}-{i}") for p in PIPELINES for i in range(3)]
    assert client.post("/api/v1/runs/batch", json={"runs": batch}, headers=headers).is_success
    with db.write() as s:
        seen = rollup_reads.change_counts(s)
        rollups.rebuild_variants(s)  # what a bulk load (the benchmark's COPY) calls
        expected, held = rollups.variant_counts(s)
        after = rollup_reads.change_counts(s)
    assert held == expected
    assert set(after) == set(seen) and min(after.values()) > max(seen.values())


def test_values_below_a_billionth_are_stored_as_zero(client: TestClient, db: Database) -> None:
    # A 1e-310 h stall times a 1e-16 idle share underflows: PostgreSQL raised "value out
    # of range: underflow" in the delete's rollup subtraction and the weekly sums (found
    # by the property test above). Such values are below any clock's resolution.
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest read admin', 'tiny')}"}
    run = make_run(
        pipeline="roll-tiny", run_id="tiny", gpu_utilization=1 - 1e-16, data_stall_hours=1e-310,
        checkpoint_hours=0.0, interruptions=[], mfu=5e-324, price_per_gpu_hour=1e-300,
    )  # fmt: skip
    r = client.post("/api/v1/runs", json=run, headers=headers)
    assert r.status_code == 201, r.text
    stored = r.json()
    assert (stored["data_stall_hours"], stored["mfu"], stored["price_per_gpu_hour"]) == (0, 0, 0)
    assert client.post("/api/v1/runs", json=run, headers=headers).status_code == 200  # a retry
    goodput = client.get("/api/v1/pipelines/roll-tiny/goodput", headers=headers)
    assert goodput.status_code == 200, goodput.text
    assert client.delete(f"/api/v1/runs/{stored['id']}", headers=headers).status_code == 204
    assert_rollups_match(db)


def test_resumed_progress_is_not_failed_badput_domain_section_2() -> None:
    """DOMAIN.md §2: a failed attempt's GPU-hours are badput "less any progress a later
    attempt of the same retraining resumed from its checkpoints". One preempted week:

    8 workers, u = 0.54, no stalls, checkpoints or waits (S = 1).
    - Attempt A is preempted after 15 h: G = 120 GPU-h, held 120, all runtime loss.
      Its last checkpoint was at 14 h.
    - Attempt B resumes from it (resumed_from_hours = 14) and runs the last 3 h:
      G = 24, progress 24, busy 0.54 x 24 = 12.96, program ratio 0.54.

    Without the resumed progress (what the week read before): held 144, loss 120,
    R = 24 / 144 = 1/6, program 12.96 / 24 = 0.54, goodput = 0.54 / 6 = 0.09 (9%).
    With it: resumed = 14 x 8 = 112 GPU-h leaves the loss (120 - 112 = 8, the hour lost
    since the last checkpoint) and counts as progress at B's ratio: program 12.96 +
    0.54 x 112 = 73.44; R = (144 - 8) / 144 = 0.9444, P = 73.44 / 136 = 0.54, goodput =
    0.9444 x 0.54 = 0.51 (51%, "about 51%"). Failed badput: 120 - 112 = 8 GPU-h; at
    $2/GPU-h $16, not $240. Productive 12.96 + 60.48 = 73.44 GPU-h.
    """
    start = datetime(2026, 11, 23, 8, tzinfo=UTC)
    base = {
        "variant": "baseline", "gpu_utilization": 0.54, "billed_price_per_gpu_hour": 2.0,
        "data_stall_hours": 0.0, "checkpoint_hours": 0.0, "scheduling_wait_hours": 0.0,
        "mfu": None, "lost_progress_hours": 0.0, "resume_hours": 0.0,
        "reschedule_hours": 0.0,
    }  # fmt: skip
    a = terms({**base, "outcome": "preempted", "gpu_hours": 120.0, "started_at": start,
               "finished_at": start + timedelta(hours=15)})  # fmt: skip
    b_start = start + timedelta(hours=16)
    b = {**base, "gpu_hours": 24.0, "started_at": b_start,
         "finished_at": b_start + timedelta(hours=3)}  # fmt: skip

    def week(resumed: float) -> tuple[float, dict[str, float]]:
        both = {k: a[k] + v for k, v in terms({**b, "resumed_from_hours": resumed}).items()}
        got = goodput_from_totals(goodput_totals({"runs": 2, **both}))
        assert got.scheduling == 1.0
        return got.overall or 0.0, both

    before, _ = week(0.0)
    after, sums = week(14.0)
    assert round(before, 6) == 0.09
    assert round(after, 6) == 0.51
    assert sums["g_failed"] == pytest.approx(8.0) and sums["u_failed"] == pytest.approx(16.0)
    assert sums["g_productive"] == pytest.approx(73.44)
    assert sums["g_productive"] + sums["g_idle"] == pytest.approx(144.0)


def test_resumed_progress_is_at_most_the_earlier_attempts_wall_clock(
    client: TestClient, db: Database
) -> None:
    # Attempt a-1 ran 15 h (08:00 -> 23:00); a-2 starts after it. 15 h resumable; 15.5 h
    # is refused with the field named, and nothing of the batch is stored.
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest read', 'resumed')}"}
    start = datetime(2026, 11, 23, 8, tzinfo=UTC)
    first = make_run(
        pipeline="roll-resume", run_id="a-1", outcome="preempted", workers=8,
        started_at=start.isoformat(), finished_at=(start + timedelta(hours=15)).isoformat(),
    )  # fmt: skip
    later = start + timedelta(hours=16)
    second = make_run(
        pipeline="roll-resume", run_id="a-2", retraining_id="a-1", workers=8,
        started_at=later.isoformat(), finished_at=(later + timedelta(hours=3)).isoformat(),
        resumed_from_hours=15.5, data_stall_hours=0.0, checkpoint_hours=0.0, interruptions=[],
    )  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": [first, second]}, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["fields"][0]["field"] == "runs.1.resumed_from_hours"
    assert "15 h" in r.json()["error"]["fields"][0]["reason"]
    listed = client.get("/api/v1/runs?pipeline=roll-resume", headers=headers)
    assert listed.status_code in (200, 404) and not listed.json().get("runs")
    # Alone, before its earlier attempt is stored: nothing to resume from.
    r = client.post("/api/v1/runs", json={**second, "resumed_from_hours": 1.0}, headers=headers)
    assert r.status_code == 422 and "(0 h)" in r.text
    second["resumed_from_hours"] = 15.0
    r = client.post("/api/v1/runs/batch", json={"runs": [first, second]}, headers=headers)
    assert r.status_code == 201, r.text
    got = client.get("/api/v1/runs?pipeline=roll-resume", headers=headers).json()["runs"]
    assert sorted(x["resumed_from_hours"] for x in got) == [0.0, 15.0]
    assert_rollups_match(db)
