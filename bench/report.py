"""Medians over repeats, the headline ratios with their targets, and the three outputs:
a table on stdout, bench/results/latest.json (+ a timestamped copy) and latest.md."""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from bench.config import Config

Row = list[str]


def _med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def aggregate(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per ingestion phase: medians over repeats and the per-repeat values."""
    keys = list(dict.fromkeys(r["key"] for r in results if r.get("group") == "ingest"))
    out = []
    for key in keys:
        recs = [r for r in results if r.get("key") == key and r.get("group") == "ingest"]
        ok = [r for r in recs if not r.get("error")]
        lat = {p: _med([r["latency_ms"].get(p) for r in ok]) for p in ("p50", "p95", "p99")}
        out.append(
            {
                "key": key,
                "name": recs[0]["name"],
                "backend": recs[0]["backend"],
                "system": recs[0].get("system"),
                "repeats": len(ok),
                "failed": len(recs) - len(ok),
                "failures": [r["error"] for r in recs if r.get("error")],
                "runs_per_s": _med([r["runs_per_s"] for r in ok]),
                "runs_per_s_each": [round(r["runs_per_s"], 1) for r in ok],
                "latency_ms": lat,
                "errors": sum(r["errors"] for r in ok),
                "error_sample": next(
                    (r["error_sample"] for r in ok if r.get("error_sample")), None
                ),
                "server_cpu_ms_per_run": _med([r.get("server_cpu_ms_per_run") for r in ok]),
                "pg_cpu_ms_per_run": _med([r.get("pg_cpu_ms_per_run") for r in ok]),
                "generator_core_pct": _med([r.get("generator_core_pct") for r in ok]),
                "machine_busy_pct": _med([r.get("machine_busy_pct") for r in ok]),
                "other_cores": _med([r.get("other_cores") for r in ok]),
                "peak_rss_mib": max(
                    (r["peak_rss_mib"] for r in ok if "peak_rss_mib" in r), default=None
                ),
            }
        )
    return out


def headlines(results: list[dict[str, Any]], cfg: Config) -> list[dict[str, Any]]:
    bc = cfg.batch_concurrency
    pairs = [
        (
            "single c=16 / raw per-row c=16",
            "cadence single c=16",
            "raw per-row c=16",
            0.25,
            None,
            True,
        ),
        (
            f"batch-1000 / raw executemany (c={bc})",
            f"cadence batch-1000 c={bc}",
            f"raw executemany-1000 c={bc}",
            0.25,
            20_000.0,
            False,
        ),
        (
            "single c=1 / raw per-row c=1",
            "cadence single c=1",
            "raw per-row c=1",
            None,
            None,
            False,
        ),
        (
            f"batch-1000 / raw COPY (c={bc})",
            f"cadence batch-1000 c={bc}",
            f"raw COPY-1000 c={bc}",
            None,
            None,
            False,
        ),
    ]
    out = []
    for label, ours, theirs, ratio_target, abs_target, zero_errors in pairs:
        mine = _by_repeat(results, f"postgresql:{ours}")
        base = _by_repeat(results, f"postgresql:{theirs}")
        common = sorted(set(mine) & set(base))
        if not common:
            continue
        ratios = [
            mine[r]["runs_per_s"] / base[r]["runs_per_s"]
            for r in common
            if base[r]["runs_per_s"] > 0
        ]
        ratio = _med(ratios)
        value = _med([mine[r]["runs_per_s"] for r in common])
        errors = sum(mine[r]["errors"] for r in common)
        targets, passed = [], True
        if ratio_target is not None:
            targets.append(f">= {ratio_target:.0%} of raw")
            passed &= ratio is not None and ratio >= ratio_target
        if abs_target is not None:
            targets.append(f">= {abs_target:,.0f} runs/s")
            passed &= value is not None and value >= abs_target
        if zero_errors:
            targets.append("0 errors")
            passed &= errors == 0
        out.append(
            {
                "comparison": label,
                "cadence_runs_per_s": value,
                "baseline_runs_per_s": _med([base[r]["runs_per_s"] for r in common]),
                "ratio": ratio,
                "ratio_each": [round(x, 4) for x in ratios],
                "errors": errors,
                "target": ", ".join(targets) or "(for information)",
                "status": ("PASS" if passed else "MISS") if targets else "-",
            }
        )
    return out


def _by_repeat(results: list[dict[str, Any]], key: str) -> dict[int, dict[str, Any]]:
    return {r["repeat"]: r for r in results if r.get("key") == key and not r.get("error")}


# ---------------------------------------------------------------- rendering


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


Column = tuple[str, Callable[[dict[str, Any]], str]]


def _backend(r: dict[str, Any]) -> str:
    return str(r["name"]) + ("" if r["backend"] == "postgresql" else f" [{r['backend']}]")


INGEST: list[Column] = [
    ("phase", _backend),
    ("runs/s", lambda a: _f(a["runs_per_s"], 0)),
    ("per repeat", lambda a: " / ".join(f"{x:,.0f}" for x in a["runs_per_s_each"])),
    ("p50", lambda a: _f(a["latency_ms"]["p50"])),
    ("p95", lambda a: _f(a["latency_ms"]["p95"])),
    ("p99", lambda a: _f(a["latency_ms"]["p99"])),
    ("errors", lambda a: str(a["errors"]) + (f" ({a['failed']} failed)" if a["failed"] else "")),
    ("server CPU ms/run", lambda a: _f(a["server_cpu_ms_per_run"], 2)),
    ("PG CPU ms/run", lambda a: _f(a["pg_cpu_ms_per_run"], 2)),
    ("generator % core", lambda a: _f(a["generator_core_pct"], 0)),
    ("machine busy %", lambda a: _f(a["machine_busy_pct"], 0)),
    ("other load cores", lambda a: _f(a["other_cores"], 2)),
    ("peak RSS MiB", lambda a: _f(a["peak_rss_mib"], 0)),
]
HEADLINE: list[Column] = [
    ("comparison", lambda h: h["comparison"]),
    ("Cadence runs/s", lambda h: _f(h["cadence_runs_per_s"], 0)),
    ("baseline runs/s", lambda h: _f(h["baseline_runs_per_s"], 0)),
    ("ratio", lambda h: "-" if h["ratio"] is None else f"{100 * h['ratio']:.1f}%"),
    ("per repeat", lambda h: " / ".join(f"{100 * x:.1f}%" for x in h["ratio_each"])),
    ("target", lambda h: h["target"]),
    ("status", lambda h: h["status"]),
]
LATENCY: list[Column] = [
    ("check", _backend),
    ("p50 ms", lambda r: _f(r["p50_ms"], 2)),
    ("p95 ms", lambda r: _f(r.get("p95_ms"), 2)),
    ("p50 new connection ms", lambda r: _f(r.get("p50_new_connection_ms"), 2)),
    ("target", lambda r: r["target"]),
    ("status", lambda r: r["status"]),
]
READS: list[Column] = [
    ("endpoint", lambda r: r["name"]),
    ("p50", lambda r: _f(r["latency_ms"].get("p50"))),
    ("p95", lambda r: _f(r["latency_ms"].get("p95"))),
    ("p99", lambda r: _f(r["latency_ms"].get("p99"))),
    ("p50 new conn", lambda r: _f(r.get("p50_new_connection_ms"))),
    ("server CPU ms/req", lambda r: _f(r.get("server_cpu_ms_per_request"))),
    ("PG CPU ms/req", lambda r: _f(r.get("pg_cpu_ms_per_request"))),
    ("other load cores", lambda r: _f(r.get("other_cores"), 2)),
    ("bytes", lambda r: f"{r.get('response_bytes') or 0:,}"),
    ("errors", lambda r: str(r["errors"])),
    ("target", lambda r: r["target"]),
    ("status", lambda r: r["status"]),
]
CLIENT: list[Column] = [
    ("loop", lambda r: r["name"]),
    ("plain s", lambda r: _f(r["plain_s"], 3)),
    ("timed s", lambda r: _f(r["timed_s"], 3)),
    ("loops timed/plain", lambda r: f"{r['loop_overhead_pct']:+.2f}%"),
    ("wrapper µs/item", lambda r: _f(r["per_item_us"], 3)),
    ("per 1 ms step", lambda r: f"{r['overhead_pct']:.3f}%"),
    ("target", lambda r: r["target"]),
    ("status", lambda r: r["status"]),
]
ORG: list[Column] = [
    ("endpoint", lambda r: r["name"]),
    ("before p95", lambda r: _f(r["before"]["latency_ms"].get("p95")) if r["before"] else "-"),
    ("after p50", lambda r: _f(r["latency_ms"].get("p50"))),
    ("after p95", lambda r: _f(r["latency_ms"].get("p95"))),
    ("before server CPU ms/req",
     lambda r: _f(r["before"].get("server_cpu_ms_per_request")) if r["before"] else "-"),
    ("after server CPU ms/req", lambda r: _f(r.get("server_cpu_ms_per_request"))),
    ("after PG CPU ms/req", lambda r: _f(r.get("pg_cpu_ms_per_request"))),
    *READS[-5:],  # other load, bytes, errors, target, status: as in the analytics table
]  # fmt: skip


def org_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The org phase's 'after' records, each with the 'before' record of the same URL."""
    before = {r["name"]: r for r in _group(results, "org-before")}
    return [{**r, "before": before.get(r["name"])} for r in _group(results, "org-after")]


def _ready(r: dict[str, Any]) -> str:
    return _f(r["ready_s"]["p50"], 1) if "ready_s" in r else "-"


COLD: list[Column] = [
    ("first read", lambda r: r["name"]),
    ("before median", lambda r: _f(r["before"]["latency_ms"]["p50"]) if r["before"] else "-"),
    ("before max", lambda r: _f(r["before"]["latency_ms"]["max"]) if r["before"] else "-"),
    ("after median", lambda r: _f(r["latency_ms"]["p50"])),
    ("after max", lambda r: _f(r["latency_ms"]["max"])),
    ("starts", lambda r: str(r["starts"])),
    ("target", lambda r: r["target"]),
    # Start to readiness: a worker reads the kept values before it is ready (issue 38).
    ("ready s before", lambda r: _ready(r["before"]) if r["before"] else "-"),
    ("ready s after", _ready),
]


def cold_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fresh worker's first read, after and before, side by side."""
    before = {r["name"]: r for r in _group(results, "cold-before")}
    return [{**r, "before": before.get(r["name"])} for r in _group(results, "cold-after")]


MEMORY: list[Column] = [
    ("check", lambda r: r["name"]),
    ("RSS after small MiB", lambda r: _f(r["rss_after_small_mib"], 0)),
    ("RSS after big MiB", lambda r: _f(r["rss_after_big_mib"], 0)),
    ("growth MiB", lambda r: _f(r["growth_mib"], 0)),
    ("peak MiB", lambda r: _f(r["peak_rss_mib"], 0)),
    ("target", lambda r: r["target"]),
    ("status", lambda r: r["status"]),
]
SOURCES: list[Column] = [
    ("importer", lambda r: r["name"]),
    ("seconds", lambda r: _f(r["seconds"])),
    ("records/s", lambda r: f"{r['per_s']:,}"),
    ("target", lambda r: r["target"]),
    ("status", lambda r: r["status"]),
    ("it said", lambda r: r["said"]),
]
FAILED: list[Column] = [
    ("group", lambda r: str(r.get("group", ""))),
    ("phase", lambda r: str(r.get("name", ""))),
    ("why", lambda r: str(r["error"])),
]


def _group(results: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    return [r for r in results if r.get("group") == group and not r.get("error")]


def tables(results: list[dict[str, Any]], cfg: Config) -> list[tuple[str, Row, list[Row]]]:
    """(title, header, rows) for every section of the report."""
    sections = [
        (
            "Ingestion (medians over repeats; latency in ms; CPU per stored run)",
            INGEST,
            aggregate(results),
        ),
        ("Headline ratios (median of the per-repeat ratios)", HEADLINE, headlines(results, cfg)),
        ("Latency at concurrency 1 (Nagle check)", LATENCY, _group(results, "latency")),
        (
            "Analytics on big-pipeline (sequential requests, one kept-alive connection; ms)",
            READS,
            _group(results, "analytics"),
        ),
        ("Memory (uvicorn workers, summed)", MEMORY, _group(results, "memory")),
        (
            "Org-wide reads, 5,000 pipelines (sequential requests; ms; before = --before code)",
            ORG,
            org_rows(results),
        ),
        (
            "A fresh worker's first org-wide read (ms; one worker, a new process each start)",
            COLD,
            cold_rows(results),
        ),
        ("Client: run.timed around a loop of 1 ms steps", CLIENT, _group(results, "client")),
        (
            "Importers, end to end (cadence import / enrich as a user runs them)",
            SOURCES,
            _group(results, "sources"),
        ),
        ("Failures", FAILED, [r for r in results if r.get("error")]),
    ]
    return [
        (title, [h for h, _ in cols], [[get(item) for _, get in cols] for item in items])
        for title, cols, items in sections
    ]


def notes(results: list[dict[str, Any]], cfg: Config) -> list[str]:
    """What a reader must know to trust the numbers: interference, generator load, drift."""
    out = list(cfg.notes)
    measured = [r for r in results if r.get("other_cores") is not None and not r.get("error")]
    if measured:
        worst = max(measured, key=lambda r: r["other_cores"])
        typical = _med([r["other_cores"] for r in measured]) or 0.0
        if worst["other_cores"] > 0.2:
            out.append(
                f"other processes (not the server, PostgreSQL for our databases, or the "
                f"generator) used {typical:.2f} cores in the median phase and up to "
                f"{worst['other_cores']:.2f} (during '{worst['name']}'): absolute numbers are "
                "pessimistic; compare the side-by-side ratios"
            )
    busy_gen = [
        r
        for r in measured
        if r.get("system") == "cadence" and (r.get("generator_core_pct") or 0) > 50
    ]
    if busy_gen:
        out.append(f"the load generator used over half a core in {len(busy_gen)} Cadence phases")
    for a in aggregate(results):
        each = a["runs_per_s_each"]
        if len(each) > 1 and min(each) > 0 and max(each) / min(each) > 1.3:
            out.append(
                f"'{a['name']}' drifted {min(each):,.0f}-{max(each):,.0f} runs/s over repeats"
            )
    return out


def text_table(header: Row, rows: list[Row]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = "  ".join("-" * w for w in widths)
    fmt = [
        " | ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    return "\n".join([fmt[0], line.replace("  ", "-+-"), *fmt[1:]])


def md_table(header: Row, rows: list[Row]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(out)


def write(
    results: list[dict[str, Any]],
    cfg: Config,
    machine: dict[str, Any],
    started: datetime,
    seconds: float,
) -> str:
    sections = [s for s in tables(results, cfg) if s[2]]
    dirty = " (dirty)" if machine.get("git_dirty") else ""
    info = (
        f"{machine.get('nproc')} x {machine.get('cpu_model')}, {machine.get('memory_gib')} GiB, "
        f"PostgreSQL {machine.get('postgresql')}, Python {machine.get('python')}, "
        f"commit {str(machine.get('git_commit'))[:10]}{dirty}, "
        f"workers={cfg.workers}, repeat={cfg.repeat}{', QUICK' if cfg.quick else ''}, "
        f"{seconds / 60:.1f} min"
    )
    said = notes(results, cfg)
    text = "\n\n".join(f"{t}\n{text_table(h, r)}" for t, h, r in sections)
    md = f"Benchmark: {info}.\n\n" + "\n\n".join(
        f"**{t}**\n\n{md_table(h, r)}" for t, h, r in sections
    )
    if said:
        text += "\n\nNotes\n" + "\n".join(f"- {n}" for n in said)
        md += "\n\nNotes:\n\n" + "\n".join(f"- {n}" for n in said)
    cfg.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    doc = {
        "started_at": started.isoformat(),
        "duration_s": round(seconds, 1),
        "config": {
            k: (str(v) if not isinstance(v, int | float | bool | list | tuple) else v)
            for k, v in asdict(cfg).items()
        },
        "machine": machine,
        "headlines": headlines(results, cfg),
        "notes": said,
        "ingest_summary": aggregate(results),
        "results": results,
    }
    latest = cfg.results_dir / "latest.json"
    latest.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    shutil.copyfile(latest, cfg.results_dir / f"bench-{stamp}.json")
    (cfg.results_dir / "latest.md").write_text(md + "\n")
    shutil.copyfile(cfg.results_dir / "latest.md", cfg.results_dir / f"bench-{stamp}.md")
    return f"Machine: {info}\n\n{text}"
