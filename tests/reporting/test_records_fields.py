"""The client's copy of the run fields is the server's: ``cadence report`` and ``export``
run from the client alone, so they cannot read the server's schemas."""

from __future__ import annotations

from typing import get_args

from cadence_client.commands import records
from cadence_client.mlflow import mapping

from app.runs.listing import CSV_COLUMNS
from app.runs.schemas import MAX_TAGS, RunIn, RunOut, UtilizationSource


def test_the_run_fields_are_the_servers_in_its_order() -> None:
    assert tuple(RunIn.model_fields) == records.RUN_FIELDS
    assert (
        frozenset(RunOut.model_fields) - frozenset(RunIn.model_fields) == records.READ_ONLY_FIELDS
    )
    assert tuple(CSV_COLUMNS) == records.EXPORT_COLUMNS  # the dashboard's download


def test_the_mlflow_mapping_knows_the_servers_limits_and_sources() -> None:
    assert mapping.MAX_TAGS == MAX_TAGS
    assert set(mapping.UTILIZATION_SOURCES) == set(get_args(UtilizationSource))
