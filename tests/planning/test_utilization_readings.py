"""A run's utilization readings from its measurement audit, and the sentence when two
sources disagree (app/planning/utilization_readings.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.planning.utilization_readings import Change, Reading, disagreement, readings

AT = datetime(2026, 12, 1, 9, tzinfo=UTC)
LATER = datetime(2026, 12, 2, 9, tzinfo=UTC)


def enriched(at: datetime, old: tuple[str | None, str | None], new: tuple[str, str],
             coverage: str | None = None, note: str | None = None) -> list[Change]:  # fmt: skip
    """The audit rows one enrichment writes (value, source, then what describes them)."""
    rows = [
        Change("gpu_utilization", old[0], new[0], at, "enricher"),
        Change("utilization_source", old[1], new[1], at, "enricher"),
    ]
    if coverage is not None:
        rows.append(Change("utilization_coverage", None, coverage, at, "enricher"))
    if note is not None:
        rows.append(Change("utilization_note", None, note, at, "enricher"))
    return rows


def test_the_ingested_value_then_each_enrichment() -> None:
    # Ingested at 0.41 (nvml_gpu_util), enriched to 0.85 (DCGM, series over half the run).
    audit = enriched(AT, ("0.41", "nvml_gpu_util"), ("0.85", "dcgm_gr_engine_active"),
                     coverage="0.5", note="the DCGM series cover 50%")  # fmt: skip
    found = readings(0.85, "dcgm_gr_engine_active", audit)
    assert found == [
        Reading(0.41, "nvml_gpu_util"),
        Reading(0.85, "dcgm_gr_engine_active", 0.5, "the DCGM series cover 50%", AT, "enricher"),
    ]


def test_a_run_never_changed_has_one_reading_and_a_run_without_utilization_none() -> None:
    assert readings(0.38, None, []) == [Reading(0.38, None)]
    assert readings(None, None, []) == []
    # Enriched from nothing: only the enrichment (no "as ingested" reading of None).
    audit = enriched(AT, (None, None), ("0.6", "dcgm_gpu_util"), coverage="1")
    assert readings(0.6, "dcgm_gpu_util", audit) == [
        Reading(0.6, "dcgm_gpu_util", 1.0, "", AT, "enricher")
    ]


def test_other_measurements_are_not_readings() -> None:
    audit = [Change("mfu", None, "0.31", AT, "x")]
    assert readings(0.38, "nvml_gpu_util", audit) == [Reading(0.38, "nvml_gpu_util")]


def test_two_sources_further_apart_than_0_15_are_said() -> None:
    # 0.85 - 0.41 = 0.44 > 0.15: said, naming both.
    apart = [Reading(0.41, "nvml_gpu_util"), Reading(0.85, "dcgm_gr_engine_active", at=AT)]
    sentence = disagreement(apart)
    assert sentence is not None
    assert "dcgm_gr_engine_active read 0.85 and nvml_gpu_util 0.41, 0.44 apart" in sentence
    # 0.50 - 0.41 = 0.09: not said; one source read twice is not two sources.
    assert disagreement([Reading(0.41, "nvml_gpu_util"), Reading(0.50, "dcgm_gpu_util")]) is None
    assert disagreement([Reading(0.2, "dcgm_gpu_util"), Reading(0.9, "dcgm_gpu_util")]) is None


def test_the_newest_reading_of_each_source_is_compared() -> None:
    # DCGM first read 0.10 (a wrong matcher), then 0.45 after a fix: 0.45 vs 0.41.
    found = [
        Reading(0.41, "nvml_gpu_util"),
        Reading(0.10, "dcgm_gr_engine_active", at=AT),
        Reading(0.45, "dcgm_gr_engine_active", at=LATER),
    ]
    assert disagreement(found) is None
