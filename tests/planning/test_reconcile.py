"""The bill against the runs (app/planning/reconcile.py), worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.planning.reconcile import (
    BillLine,
    Holding,
    held_hours,
    reconcile,
    resource_tail,
    split_line,
)

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


def at(day: int, hour: float = 0.0, month: int = 11) -> datetime:
    return datetime(2026, month, day, tzinfo=UTC) + timedelta(hours=hour)


def test_a_day_charge_with_one_ten_hour_attempt_is_ten_24ths_explained() -> None:
    # 24 h of an 8-GPU instance at $48/h effective = $1,152; the run held it 08:00-18:00:
    # explained 1,152 x 10/24 = $480, unexplained $672; 192 GPU-hours -> $6/GPU-hour.
    line = BillLine(at(2), at(3), cost=1152.0, gpu_hours=192.0, resource_id="i-1")
    run = Holding("ranker", "i-1", at(2, 8), at(2, 18))
    f = reconcile([line], [run], NOV, DEC).of("ranker")
    assert f.billed_usd == pytest.approx(1152.0)
    assert f.explained_usd == pytest.approx(480.0)
    assert f.unexplained_usd == pytest.approx(672.0)
    assert f.explained_gpu_hours == pytest.approx(80.0)
    assert f.effective_price_per_gpu_hour == pytest.approx(6.0)


def test_overlapping_runs_explain_an_hour_once() -> None:
    # 08-12 and 10-14 cover 08-14: 6 h, not 8.
    assert held_hours(at(2), at(3), [(at(2, 8), at(2, 12)), (at(2, 10), at(2, 14))]) == 6.0
    # A run past the period counts only inside it: 20:00 to 04:00 next day -> 4 h of day 2.
    assert held_hours(at(2), at(3), [(at(2, 20), at(3, 4))]) == pytest.approx(4.0)


def test_two_pipelines_share_a_node() -> None:
    # Period 10 h; a held 6 h, b held 2 h: a explains 0.6, b 0.2; the idle 0.2 is shared
    # 6:2, so a is billed 0.6 + 0.2 x 6/8 = 0.75 and b 0.2 + 0.2 x 2/8 = 0.25.
    shares = split_line(10.0, {"a": 6.0, "b": 2.0})
    assert shares["a"] == pytest.approx((0.75, 0.6))
    assert shares["b"] == pytest.approx((0.25, 0.2))
    # Together 15 h in a 10 h period (both ran at once): scaled by 10/15, fully explained.
    both = split_line(10.0, {"a": 10.0, "b": 5.0})
    assert both["a"] == pytest.approx((2 / 3, 2 / 3))
    assert both["b"] == pytest.approx((1 / 3, 1 / 3))


def test_a_charge_across_the_month_end_is_split_by_time() -> None:
    # Nov 30 12:00 to Dec 1 12:00, $240: 12 of its 24 h in November -> $120 there; the
    # run held it Nov 30 18:00 to Dec 1 06:00 -> 6 h in November: 240 x 6/24 = $60.
    line = BillLine(at(30, 12), at(30, 36), cost=240.0, gpu_hours=24.0, resource_id="n-1")
    run = Holding("ranker", "n-1", at(30, 18), at(30, 30))
    f = reconcile([line], [run], NOV, DEC).of("ranker")
    assert (f.billed_usd, f.explained_usd) == pytest.approx((120.0, 60.0))


def test_idle_hours_untagged_and_tagged_reservations() -> None:
    lines = [
        # Hourly lines for i-1: held 09:00-10:00 only; the 10:00 hour is idle but i-1
        # was ranker's this month, so its $30 is ranker's unexplained spend.
        BillLine(at(2, 9), at(2, 10), 30.0, 8.0, "i-1"),
        BillLine(at(2, 10), at(2, 11), 30.0, 8.0, "i-1"),
        # A week of a reserved node tagged for ranker, no run on it: 168 h x $20 = $3,360.
        BillLine(at(9), at(16), 3360.0, 1344.0, "r-1", pipeline_tag="ranker"),
        # An untagged instance nobody names: $100 unattributed.
        BillLine(at(3), at(4), 100.0, 24.0, "i-9"),
    ]
    runs = [Holding("ranker", "i-1", at(2, 9), at(2, 10))]
    result = reconcile(lines, runs, NOV, DEC)
    f = result.of("ranker")
    # billed 30 + 30 + 3,360 = 3,420; explained 30; unexplained 3,390.
    assert (f.billed_usd, f.explained_usd) == pytest.approx((3420.0, 30.0))
    assert f.unexplained_usd == pytest.approx(3390.0)
    # GPU-hours 8 + 8 + 1,344 = 1,360: 3,420 / 1,360 = $2.5147/GPU-hour.
    assert f.effective_price_per_gpu_hour == pytest.approx(3420.0 / 1360.0)
    assert result.unattributed.billed_usd == pytest.approx(100.0)
    assert result.total().billed_usd == pytest.approx(3520.0)


def test_nothing_billed_has_no_price() -> None:
    f = reconcile([], [], NOV, DEC).of("ranker")
    assert f.billed_usd == 0.0 and f.effective_price_per_gpu_hour is None
    assert f.explained_share is None


def test_a_run_may_name_a_resource_by_its_last_segment() -> None:
    # The bill spells the ARN; the run's tag the instance id: the same 10/24 as in full.
    arn = "arn:aws:ec2:us-east-1:111122223333:instance/i-1"
    line = BillLine(at(2), at(3), cost=1152.0, gpu_hours=192.0, resource_id=arn)
    short = Holding("ranker", "i-1", at(2, 8), at(2, 18))
    assert reconcile([line], [short], NOV, DEC).of("ranker").explained_usd == pytest.approx(480.0)
    # Named both ways by two runs at once: the hours count once (10 h, not 20).
    both = [short, Holding("ranker", arn, at(2, 8), at(2, 18))]
    assert reconcile([line], both, NOV, DEC).of("ranker").explained_usd == pytest.approx(480.0)
    assert resource_tail("/subscriptions/s/resourceGroups/g/providers/x/virtualMachines/vm-1") == (
        "vm-1"
    )


def test_a_charge_at_an_instant_counts_in_its_month() -> None:
    # A $50 purchase at Nov 20 12:00 (start = end), tagged ranker: billed $50, unexplained.
    purchase = BillLine(at(20, 12), at(20, 12), 50.0, 0.0, "ri-1", pipeline_tag="ranker")
    f = reconcile([purchase], [], NOV, DEC).of("ranker")
    assert (f.billed_usd, f.explained_usd) == (50.0, 0.0)
    assert reconcile([purchase], [], DEC, datetime(2027, 1, 1, tzinfo=UTC)).of("ranker").lines == 0
