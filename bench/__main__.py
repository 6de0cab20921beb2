"""`python -m bench`: see bench/cli.py for the flags and bench/README.md for the method."""

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
