"""The GPU catalog (issue 37): the checked-in file parses, and the refresh script turns
SkyPilot's ``vms.csv`` (its V5+ schema; fixtures trimmed from it) into catalog rows,
keeping the fractions entered by hand."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from app.billing.gpu_catalog import CATALOG_FILE, gpus_per_unit, read_catalog
from app.planning.gpu_skus import parse_gpus

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "skypilot"


def refresh_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "refresh", ROOT / "scripts" / "refresh_gpu_catalog.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_catalog_names_each_type_once_with_a_count() -> None:
    entries = read_catalog()
    names = [(e.cloud, e.instance_type.lower()) for e in entries]
    assert len(names) == len(set(names))
    assert all(0 < e.gpus <= 64 and e.source in {"hand", "skypilot"} for e in entries)


def test_a_refresh_adds_what_skypilot_lists_and_keeps_the_hand_fractions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gpu_catalog.csv"
    shutil.copy(CATALOG_FILE, out)
    assert refresh_script().main(["--from", str(FIXTURES), "--out", str(out)]) == 0
    rows = {e.instance_type: e for e in read_catalog(out)}
    # New from SkyPilot: a 2-GPU g7e and GCP's a3-highgpu-8g.
    assert (rows["g7e.12xlarge"].gpus, rows["g7e.12xlarge"].source) == (2.0, "skypilot")
    assert rows["a3-highgpu-8g"].gpus == 8.0
    # SkyPilot says a g6f.large holds one (virtual) L4; the hand row's eighth wins.
    assert (rows["g6f.large"].gpus, rows["g6f.large"].source) == (0.125, "hand")
    # Not GPUs: Inferentia, a TPU; no accelerator: m5.large.
    assert not {"inf2.xlarge", "m5.large", ""} & set(rows)
    assert "2 new" in capsys.readouterr().out  # g7e.12xlarge and a3-highgpu-8g
    # Every hand row survives the refresh.
    hand = {e.instance_type for e in read_catalog() if e.source == "hand"}
    assert hand <= set(rows)


def test_a_bad_catalog_row_is_named_by_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "gpu_catalog.csv"
    bad.write_text("cloud,instance_type,accelerator,gpus,source\naws,x.large,L4,0,hand\n")
    with pytest.raises(ValueError, match="line 2"):
        read_catalog(bad)
    assert parse_gpus("1/6") == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        parse_gpus("nan")


def test_a_catalog_type_counts_in_a_bill_text() -> None:
    # The catalog's rows reach the bill reader: an NC24ads is one A100, a g6e.48xlarge 8.
    assert gpus_per_unit(["Standard_NC24ads_A100_v4"]) == 1
    assert gpus_per_unit(["USE1-BoxUsage:g6e.48xlarge"]) == 8
