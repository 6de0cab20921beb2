"""Refresh app/billing/gpu_catalog.csv from SkyPilot's catalog (issue 37).

Why SkyPilot's: one schema (``vms.csv``: InstanceType, AcceleratorName,
AcceleratorCount, ...) for AWS, Azure and GCP, kept current by that project from the
clouds' own APIs, with fractional accelerator counts. The server never reads the
network: this script writes the checked-in file, which a pull request then reviews.

Rows entered by hand (``source`` "hand": the fractions of AWS g6f and Azure NVadsA10 v5
from the providers' pages, and types SkyPilot does not list) are kept and win over the
refresh: SkyPilot counts a g6f's virtual GPU as one. Accelerators that are not GPUs
(TPUs, Inferentia, Trainium) are left out.

    python scripts/refresh_gpu_catalog.py                      # from GitHub
    python scripts/refresh_gpu_catalog.py --from ~/skypilot-catalog/catalogs/v7
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import urllib.request
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "app" / "billing" / "gpu_catalog.csv"
SOURCE = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs/v7"
CLOUDS = ("aws", "azure", "gcp")
NOT_GPUS = ("tpu", "inferentia", "trainium", "gaudi")
HEADER = ("cloud", "instance_type", "accelerator", "gpus", "source")


def read_source(base: str, cloud: str) -> str:
    """One cloud's ``vms.csv`` from a directory or a URL base."""
    where = f"{base.rstrip('/')}/{cloud}/vms.csv"
    if "://" in base:
        with urllib.request.urlopen(where, timeout=60) as answer:
            return str(answer.read().decode("utf-8"))
    return Path(where).expanduser().read_text(encoding="utf-8")


def gpu_rows(cloud: str, text: str) -> dict[str, tuple[str, ...]]:
    """Instance type -> catalog row, for rows that carry a GPU (one per type: a type's
    regions repeat it)."""
    out: dict[str, tuple[str, ...]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name, count = row.get("AcceleratorName") or "", row.get("AcceleratorCount") or ""
        if not name or not count or any(word in name.lower() for word in NOT_GPUS):
            continue
        gpus = Fraction(count).limit_denominator(64)
        if gpus <= 0:
            continue
        out.setdefault(
            row["InstanceType"], (cloud, row["InstanceType"], name, str(gpus), "skypilot")
        )
    return out


def merged(
    current: list[tuple[str, ...]], fresh: dict[str, tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """The refreshed rows, with every hand row kept (and winning over SkyPilot's)."""
    rows = dict(fresh)
    rows.update({r[1]: r for r in current if r[4] == "hand"})
    return sorted(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="base", default=SOURCE, help="directory or URL base")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with args.out.open(newline="", encoding="utf-8") as f:
        current = [tuple(r[h] for h in HEADER) for r in csv.DictReader(f)]
    fresh: dict[str, tuple[str, ...]] = {}
    for cloud in CLOUDS:
        try:
            fresh.update(gpu_rows(cloud, read_source(args.base, cloud)))
        except OSError as exc:
            print(f"error: {cloud}: {exc}", file=sys.stderr)
            return 1
    rows = merged(current, fresh)
    before = {r[1]: r for r in current}
    added = [r[1] for r in rows if r[1] not in before]
    changed = [r[1] for r in rows if r[1] in before and before[r[1]] != r]
    with args.out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows)
    print(f"{args.out}: {len(rows)} instance types ({len(added)} new, {len(changed)} changed)")
    for name in added + changed:
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
