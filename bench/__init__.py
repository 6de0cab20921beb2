"""Cadence benchmark harness: `python -m bench` (see bench/README.md).

Starts the real service as a subprocess, drives it with wrk (single runs) and a small
Python client (batches, sequential reads), compares ingestion with raw psycopg inserts
into the same PostgreSQL, and times the analytics endpoints on a 1M-run database.
"""
