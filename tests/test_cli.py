"""The `cadence` command: migrate, demo (idempotent), token create/list/revoke."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app import cli, settings
from app.auth.service import hash_token
from app.db.engine import Database, make_engine
from app.db.models import ApiToken, Pipeline, Run
from app.settings import Settings
from tests.fixtures.serving import serve_exit_code


def counts(url: str) -> tuple[int, int]:
    db = Database(make_engine(Settings(database_url=url)))
    try:
        with db.read() as s:
            return (
                int(s.scalar(select(func.count()).select_from(Pipeline)) or 0),
                int(s.scalar(select(func.count()).select_from(Run)) or 0),
            )
    finally:
        db.dispose()


def test_migrate_then_demo_is_idempotent(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["migrate"]) == 0
    assert cli.main(["demo", "--if-empty"]) == 0
    out = capsys.readouterr().out
    assert "loaded demo pipelines: recsys-ranker (25 runs), fraud-detector (16 runs)" in out
    # and the org plan's four (app/demo_portfolio.py): 8 + 8 + 16 (twice weekly) + 8 runs.
    assert "search-embedder (8 runs), churn-scorer (8 runs), ads-ctr (16 runs)" in out
    first = counts(cli_db)
    assert first == (6, 41 + 40)
    assert cli.main(["demo", "--if-empty"]) == 0
    assert "already holds pipelines" in capsys.readouterr().out
    assert cli.main(["demo"]) == 0  # `make demo` again: still no duplicates
    assert counts(cli_db) == first


def test_demo_on_empty_false_loads_nothing(
    cli_db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make run` runs `cadence demo --if-empty`: with CADENCE_DEMO_ON_EMPTY=false a fresh
    (e.g. production) database stays empty; `cadence demo` by name still loads."""
    assert cli.main(["migrate"]) == 0
    monkeypatch.setenv("CADENCE_DEMO_ON_EMPTY", "false")
    settings.get_settings.cache_clear()
    assert cli.main(["demo", "--if-empty"]) == 0
    assert "CADENCE_DEMO_ON_EMPTY=false" in capsys.readouterr().out
    assert counts(cli_db) == (0, 0)
    assert cli.main(["demo"]) == 0
    assert counts(cli_db) == (6, 81)


def test_tokens(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["migrate"])
    capsys.readouterr()
    assert (
        cli.main(
            ["token", "create", "--name", "ci", "--scope", "ingest", "--pipeline", "recsys-ranker"]
        )
        == 0
    )
    out = capsys.readouterr().out.strip().splitlines()
    secret = out[-1]
    assert secret.startswith("cad_") and len(secret) > 40  # shown once, on the last line
    assert cli.main(["token", "create", "--name", "ci", "--scope", "read"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["token", "create", "--name", "x", "--scope", "root"]) == 1
    assert "scopes must be some of" in capsys.readouterr().err
    assert cli.main(["token", "list"]) == 0
    listing = capsys.readouterr().out
    assert "ci" in listing and "ingest" in listing and "never" in listing
    assert secret not in listing
    assert cli.main(["token", "revoke", "--name", "ci"]) == 0
    assert cli.main(["token", "list"]) == 0
    assert "revoked" in capsys.readouterr().out
    assert cli.main(["token", "revoke", "--name", "nope"]) == 1


def test_token_create_rotate_is_safe_to_run_twice(
    cli_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's setup line: `cadence token create --rotate` creates the token, and run
    again prints a fresh secret for the same name; the old secret stops matching."""
    cli.main(["migrate"])
    line = ["token", "create", "--name", "setup", "--scope", "ingest", "--rotate"]
    assert cli.main(line) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert cli.main(["token", "create", "--name", "setup", "--scope", "ingest"]) == 1
    err = capsys.readouterr().err
    assert "already exists" in err and "--rotate" in err
    assert cli.main([*line[:5], "read", "--rotate"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    second = out[-1]
    assert second.startswith("cad_") and second != first
    assert "rotated token 'setup' with scopes read" in out[0]
    db = Database(make_engine(Settings(database_url=cli_db)))
    try:
        with db.read() as s:
            [row] = s.scalars(select(ApiToken).where(ApiToken.name == "setup"))
            assert row.token_hash == hash_token(second) != hash_token(first)
    finally:
        db.dispose()


def test_serve_explains_an_unreachable_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CADENCE_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert serve_exit_code() == 2
    err = capsys.readouterr().err
    assert "cannot reach the database" in err and "Traceback" not in err


def test_production_refuses_default_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CADENCE_ENVIRONMENT", "production")
    assert serve_exit_code() == 2
    assert "CADENCE_SECRET_KEY" in capsys.readouterr().err
