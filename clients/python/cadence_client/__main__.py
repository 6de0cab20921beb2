"""``python -m cadence_client``: the ``cadence`` command."""

import sys

from cadence_client.cli import main

sys.exit(main())
