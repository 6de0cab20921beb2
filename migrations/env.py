"""Alembic environment: URL from Settings, metadata from app.db.models."""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection

from app.db import models
from app.db.base import UTCDateTime
from app.db.engine import make_engine
from app.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = models.Base.metadata


def database_url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings().database_url


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Render our UTCDateTime as a plain timezone-aware DateTime in revision files."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_item=render_item,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    engine = make_engine(Settings(database_url=database_url()))
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                # Batch operations rebuild a table (copy, DROP, rename); with foreign keys
                # enforced, the DROP of e.g. pipeline would cascade to every run. SQLite
                # takes this pragma only outside a transaction, so on the driver's
                # connection, before SQLAlchemy begins one (app/db/engine.py's BEGIN).
                conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
            run_with(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
