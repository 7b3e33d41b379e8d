"""``python -m fncache``: the command-line interface (see :mod:`fncache.cli.main`)."""

import sys

from fncache.cli.main import main

sys.exit(main())
