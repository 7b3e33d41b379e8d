"""``python -m fncache``: the command-line interface (see :mod:`fncache.cli`)."""

import sys

from fncache.cli import main

sys.exit(main())
