"""The GPU catalog (issue 37): instance types and their GPUs, read once from
``gpu_catalog.csv`` beside this module (refreshed by scripts/refresh_gpu_catalog.py,
docs/finops.md "The GPU catalog"), and the bill's questions asked of it."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from app.planning import gpu_skus
from app.planning.gpu_skus import CLOUDS, Catalog, CatalogEntry, parse_gpus

CATALOG_FILE = Path(__file__).with_name("gpu_catalog.csv")


def read_catalog(path: Path = CATALOG_FILE) -> tuple[CatalogEntry, ...]:
    """The catalog's rows; a bad row is an error naming its line (the file is ours)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for number, row in enumerate(rows, start=2):
        try:
            if row["cloud"] not in CLOUDS or not row["instance_type"]:
                raise ValueError(f"cloud {row['cloud']!r}, type {row['instance_type']!r}")
            gpus = parse_gpus(row["gpus"])
            out.append(
                CatalogEntry(
                    row["cloud"], row["instance_type"], row["accelerator"], gpus, row["source"]
                )
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path.name} line {number}: {exc}") from exc
    return tuple(out)


CATALOG = Catalog.of(read_catalog())  # read at import: a bad file stops the server early


def gpus_per_unit(texts: Iterable[str]) -> float | None:
    """GPUs in one hour of a bill line's unit, from the catalog (see gpu_skus)."""
    return gpu_skus.gpus_per_unit(texts, CATALOG)


def unknown_gpu_types(texts: Iterable[str]) -> set[str]:
    """GPU-family instance types the catalog does not know (the import's notice)."""
    return gpu_skus.unknown_gpu_types(texts, CATALOG)
