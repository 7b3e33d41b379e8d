"""Long-running stress tests, outside the default run (``--run-stress`` or ``FNCACHE_STRESS=1``)."""
