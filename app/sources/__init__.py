"""Importers from the systems teams already run (Slurm accounting, Prometheus/DCGM, ...).

Each source has a pure mapping module (source records in, run payloads out) and a
command module (the CLI, the reading, the posting through cadence-client)."""
