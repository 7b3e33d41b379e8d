"""The notebook front door: the ``%%fncache`` cell magic."""

from typing import Any

__all__ = ["load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext fncache``: register the ``%%fncache`` cell magic (see :mod:`fncache.notebook.magic`).

    IPython is imported only here, so ``import fncache`` never imports it.
    """
    from fncache.notebook.magic import load_ipython_extension as load

    load(ipython)
