"""Is the database at the migration head? Used by `serve`, `/readyz` and startup."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from app.settings import PROJECT_ROOT


def alembic_config(database_url: str | None = None) -> Config:
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    if database_url:
        config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


@lru_cache
def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@dataclass(frozen=True)
class SchemaState:
    current: str | None
    head: str | None

    @property
    def at_head(self) -> bool:
        return self.current == self.head

    def message(self) -> str:
        if self.at_head:
            return f"database schema is at head ({self.head})"
        found = self.current or "empty (no migrations applied)"
        return (
            f"database schema is {found}, but this version of Cadence needs {self.head}. "
            "Run `cadence migrate` (or `make migrate`) to upgrade it."
        )


def schema_state(engine: Engine) -> SchemaState:
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return SchemaState(current=current, head=head_revision())
