"""Shared pytest configuration: the real-server fixtures of ``tests/servers.py``."""

pytest_plugins = ["tests.servers"]
