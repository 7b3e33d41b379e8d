"""The ``fncache`` command line: look into a store, explain a miss, check the set-up, prune."""

from fncache.cli.main import main

__all__ = ["main"]
