"""Which resource ids join a run to a bill line (app/planning/resource_ids.py), and the
reconciliation that uses them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.planning.reconcile import BillLine, Holding, reconcile
from app.planning.resource_ids import holding_keys, line_keys, short_id

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)
ARN = "arn:aws:ec2:us-east-1:111122223333:instance/i-0abc"
AZ = "/subscriptions/S1/resourceGroups/ML/providers/Microsoft.Compute/virtualMachines/GPU-1"


def joins(run: str, line: str) -> bool:
    return bool(holding_keys(run) & line_keys(line))


def test_the_forms_that_join() -> None:
    assert short_id(ARN) == short_id("arn:aws:ec2:us-east-1:1:instance:i-0abc") == "i-0abc"
    assert joins(ARN, ARN)  # the full id
    assert joins("i-0abc", ARN)  # the run names the line's last segment
    assert joins(ARN, "i-0abc")  # the run's ARN holds the line's bare instance id
    assert joins(AZ, AZ.lower())  # Azure ids compare without case
    assert joins("gpu-1", AZ)  # a VM name, in the bill's other case
    assert not joins("I-0ABC", ARN)  # AWS ids keep their case
    other = AZ.replace("/ML/", "/OTHER/")
    assert not joins(other, AZ)  # the same VM name in another resource group
    assert not joins("i-0abd", ARN)


def test_the_arn_tagged_run_explains_the_bare_id_line() -> None:
    # A 24 h line of $686.54 for i-0abc; the run tagged with the ARN held it 12 h:
    # 686.54 x 12 / 24 = 343.27 explained, none unattributed.
    line = BillLine(
        NOV, NOV + timedelta(days=1), cost=686.54, gpu_hours=192.0, resource_id="i-0abc"
    )
    run = Holding("ranker", ARN, NOV, NOV + timedelta(hours=12))
    out = reconcile([line], [run], NOV, DEC)
    assert out.of("ranker").explained_usd == pytest.approx(343.27)
    assert out.of("ranker").billed_usd == pytest.approx(686.54)
    assert out.unattributed.billed_usd == 0.0


def test_an_azure_line_in_upper_case_joins_the_lower_case_tag() -> None:
    line = BillLine(NOV, NOV + timedelta(days=1), cost=686.54, gpu_hours=24.0, resource_id=AZ)
    run = Holding("vision", AZ.lower(), NOV, NOV + timedelta(days=1))
    out = reconcile([line], [run], NOV, DEC)
    assert out.of("vision").explained_usd == pytest.approx(686.54)  # held all 24 h
    assert out.unattributed.billed_usd == 0.0


def test_the_named_instance_types_are_known_and_others_noticed() -> None:
    from app.billing.gpu_catalog import gpus_per_unit, unknown_gpu_types

    known = {
        "g5g.xlarge": 1, "g5g.16xlarge": 2, "p6e-gb200.36xlarge": 4, "p6-b300.48xlarge": 8,
        "g4ad.4xlarge": 1, "g4ad.16xlarge": 4, "Standard_ND96isr_H200_v5": 8,
        "Standard_NC4as_T4_v3": 1, "Standard_NC64as_T4_v3": 4, "Standard_NV36ads_A10_v5": 1,
        "Standard_NV72ads_A10_v5": 2, "a4x-highgpu-4g": 4, "g2-standard-8": 1,
        "g2-standard-48": 4,
    }  # fmt: skip
    assert {name: gpus_per_unit([name]) for name in known} == known
    # Part of one GPU counts its fraction (the catalog, from AWS's and Azure's pages):
    # g6f.large an eighth of an L4, NV6ads a sixth of an A10, NV12ads a third.
    assert gpus_per_unit(["BoxUsage:g6f.large"]) == 0.125
    assert gpus_per_unit(["USE1-BoxUsage:g6f.2xlarge"]) == 0.25
    assert gpus_per_unit(["Standard_NV6ads_A10_v5"]) == pytest.approx(1 / 6)
    assert gpus_per_unit(["NV12ads A10 v5"]) == pytest.approx(1 / 3)
    assert unknown_gpu_types(["BoxUsage:g6f.large", "Standard_NV6ads_A10_v5"]) == set()
    assert unknown_gpu_types(["BoxUsage:g7x.large", "p5.48xlarge"]) == {"g7x.large"}
    assert unknown_gpu_types(["BoxUsage:m5.large", "p5.48xlarge"]) == set()
