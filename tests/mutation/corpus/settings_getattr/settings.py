"""Settings served by a module-level __getattr__ (PEP 562), with defaults in a table."""

_DEFAULTS = {"SCALE": 3, "OFFSET": 1.5, "MODE": "sum"}


def __getattr__(name):
    try:
        return _DEFAULTS[name]
    except KeyError:
        raise AttributeError(name) from None
