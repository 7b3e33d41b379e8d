"""The notebook front door: the ``%%fncache`` cell magic."""
