"""Say loudly when a service the suite needs is missing (`python -m tests.services postgres`).

Exit 0: available, run that pass. Exit 1: missing; `make test` prints a banner and
skips the pass. Exit 2: missing and CADENCE_REQUIRE_POSTGRES=1 (CI): `make test` fails.
"""

from __future__ import annotations

import os
import sys

BANNER = "!" * 78


def postgres_reachable(url: str) -> str | None:
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except Exception as exc:  # any failure to connect is "unreachable"
        return str(exc).splitlines()[0]
    return None


def main(argv: list[str]) -> int:
    if argv[1:] != ["postgres"]:
        print("usage: python -m tests.services postgres", file=sys.stderr)
        return 2
    from tests.conftest import postgres_url

    url = postgres_url()
    problem = postgres_reachable(url)
    if problem is None:
        return 0
    required = os.environ.get("CADENCE_REQUIRE_POSTGRES") == "1"
    print(BANNER, file=sys.stderr)
    print(f"PostgreSQL is NOT reachable at {url}:\n  {problem}", file=sys.stderr)
    if required:
        print("CADENCE_REQUIRE_POSTGRES=1: failing.", file=sys.stderr)
    else:
        print(
            "The PostgreSQL half of the suite was SKIPPED. Start PostgreSQL or set\n"
            "CADENCE_TEST_DATABASE_URL; CI sets CADENCE_REQUIRE_POSTGRES=1.",
            file=sys.stderr,
        )
    print(BANNER, file=sys.stderr)
    return 2 if required else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
