"""The server's `cadence` commands: `serve | migrate | demo | token create|list|revoke |
import focus|slurm|kubernetes | enrich prometheus`.

The `cadence` script is the client distribution's (`cadence_client.cli`: report, export,
check, import mlflow, spool flush...); this distribution adds these commands to it
through the `cadence.commands` entry point in pyproject.toml, so the two never install
the same script. `python -m app.cli` runs the same command with these commands added.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from alembic import command
from cadence_client import cli as client_cli
from sqlalchemy.exc import SQLAlchemyError

from app.billing.command import add_parsers as add_billing_parsers
from app.db.engine import Database, make_database
from app.db.revision import alembic_config, schema_state
from app.exceptions import CadenceError
from app.server import PROTOCOL
from app.settings import Settings, get_settings
from app.sources.commands import add_parsers as add_source_parsers

Handler = Callable[[Settings, argparse.Namespace], int]


def _database(settings: Settings) -> Database:
    """The database a command opens its units of work on (``write()``, ``read()``)."""
    return make_database(settings)


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    config = alembic_config(settings.database_url)
    command.upgrade(config, args.revision)
    print(f"database at {args.revision}: {_safe_url(settings)}")
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    db = _database(settings)
    try:
        state = schema_state(db.engine)
    except SQLAlchemyError as exc:
        print(
            f"cadence: cannot reach the database at {_safe_url(settings)}: "
            f"{str(exc).splitlines()[0]}",
            file=sys.stderr,
        )
        return 2
    finally:
        db.dispose()
    if not state.at_head:
        print(f"cadence: {state.message()}", file=sys.stderr)
        return 2
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host or settings.host,
        port=args.port or settings.port,
        workers=args.workers or settings.workers,
        log_level=settings.log_level,
        http=PROTOCOL,  # with the header and body deadlines (app/server.py)
        timeout_keep_alive=settings.keep_alive_seconds,  # type: ignore[arg-type]
        proxy_headers=True,
    )
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from app.demo import load_demo, week_start
    from app.demo_portfolio import load_portfolio_demo

    if args.if_empty and not settings.demo_on_empty:
        # `make run` runs `demo --if-empty`: a production database pointed at by mistake
        # must not be filled with demo runs. A plain `cadence demo` is asked for by name.
        print("CADENCE_DEMO_ON_EMPTY=false: demo data not loaded")
        return 0
    db = _database(settings)
    try:
        with db.write() as session:
            loaded = load_demo(session, only_if_empty=args.if_empty)
            if not loaded.startswith("database already holds"):
                now = datetime.now(UTC)
                more = load_portfolio_demo(session, week_start(now), now)
                loaded += "; more for the org plan: " + ", ".join(more) if more else ""
    finally:
        db.dispose()
    print(loaded)
    return 0


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    from app.auth import service

    db = _database(settings)
    try:
        with db.write() as session:
            if args.token_command == "create":
                pipelines = [p for p in (args.pipeline or []) if p]
                row, secret = service.create_token(session, args.name, args.scope, pipelines)
                limit = f" for pipelines {', '.join(pipelines)}" if pipelines else ""
                print(f"created token {row.name!r} with scopes {row.scopes}{limit}.")
                print("It is shown once; store it now (e.g. as CADENCE_TOKEN):")
                print(secret)
            elif args.token_command == "list":
                rows = service.list_tokens(session)
                print(
                    f"{'NAME':<24} {'SCOPES':<20} {'PREFIX':<12} {'CREATED':<20} "
                    f"{'LAST USED':<20} STATUS"
                )
                for r in rows:
                    print(
                        f"{r.name:<24} {r.scopes:<20} {r.prefix:<12} "
                        f"{_when(r.created_at):<20} {_when(r.last_used_at):<20} "
                        f"{'revoked ' + _when(r.revoked_at) if r.revoked_at else 'active'}"
                    )
            else:
                row = service.revoke_token(session, args.name)
                print(f"revoked token {row.name!r}")
    finally:
        db.dispose()
    return 0


def _when(value: object) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "never"  # type: ignore[attr-defined]


def _safe_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


def with_settings(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """A server command as the client's CLI runs it: ``handler(args)`` with the settings
    read, and the server's errors as exit codes (1 refused, 2 database or configuration)."""

    def run(args: argparse.Namespace) -> int:
        if getattr(args, "scope", None):
            args.scope = ",".join(args.scope)
        try:
            return int(handler(get_settings(), args))
        except CadenceError as exc:
            print(f"cadence: {exc.message}", file=sys.stderr)
            return 1
        except SQLAlchemyError as exc:
            print(f"cadence: database error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
        except ValueError as exc:  # settings validation, e.g. a default secret in production
            print(f"cadence: configuration error: {exc}", file=sys.stderr)
            return 2

    return run


def add_parsers(sub: Any) -> None:
    """The ``cadence.commands`` entry point: serve, migrate, demo, token."""
    serve = sub.add_parser("serve", help="serve the API and dashboard (checks the schema first)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int)
    serve.set_defaults(func=with_settings(cmd_serve))

    migrate = sub.add_parser("migrate", help="apply database migrations (alembic upgrade)")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=with_settings(cmd_migrate))

    demo = sub.add_parser("demo", help="load the demo pipelines (idempotent)")
    demo.add_argument(
        "--if-empty",
        action="store_true",
        help="do nothing if the database already holds a pipeline, or if "
        "CADENCE_DEMO_ON_EMPTY=false",
    )
    demo.set_defaults(func=with_settings(cmd_demo))

    token = sub.add_parser("token", help="manage API tokens")
    tsub = token.add_subparsers(dest="token_command", required=True)
    create = tsub.add_parser("create", help="create a token; prints it once, on the last line")
    create.add_argument("--name", required=True)
    create.add_argument(
        "--scope",
        required=True,
        action="append",
        help="ingest, read or admin; repeat or comma-separate for several",
    )
    create.add_argument(
        "--pipeline", action="append", help="limit an ingest token to this pipeline (repeatable)"
    )
    tsub.add_parser("list", help="list tokens with their last-used time")
    revoke = tsub.add_parser("revoke", help="revoke a token by name")
    revoke.add_argument("--name", required=True)
    token.set_defaults(func=with_settings(cmd_token))

    add_billing_parsers(sub)  # import focus: app/billing/command.py
    _with_settings_at(sub, "import", "focus")
    add_source_parsers(sub)  # import slurm|kubernetes, enrich prometheus: app/sources
    for path in (("import", "slurm"), ("import", "kubernetes"), ("enrich", "prometheus")):
        _with_settings_at(sub, *path)


def _with_settings_at(sub: Any, *path: str) -> None:
    """Wrap the handler of the subcommand at ``path`` (a server-style
    ``func(settings, args)``) as the client's CLI calls it."""
    node = sub.choices[path[0]]
    for name in path[1:]:
        action = next(a for a in node._actions if isinstance(a, argparse._SubParsersAction))
        node = action.choices[name]
    node.set_defaults(func=with_settings(node.get_default("func")))


def parser() -> argparse.ArgumentParser:
    """The whole command: the client's commands and these."""
    whole: argparse.ArgumentParser = client_cli.parser(extensions=[add_parsers])
    return whole


def main(argv: Sequence[str] | None = None) -> int:
    return int(client_cli.main(argv, extensions=[add_parsers]))


if __name__ == "__main__":
    sys.exit(main())
