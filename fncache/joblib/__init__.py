"""The joblib layer: ``fncache.Memory``, a drop-in replacement for ``joblib.Memory``."""
