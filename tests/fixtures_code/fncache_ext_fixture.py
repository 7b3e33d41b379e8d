"""Types that use fncache's extension points, registered at import.

Imported by the test process and by its spawned workers alike, as a user's own module would be, so
that both hash these types the same way.
"""

import fncache


class Handle:
    """Stands for an external resource (a connection): cannot be pickled, hashed by its URL."""

    def __init__(self, url):
        self.url = url

    def __reduce__(self):
        raise TypeError("a Handle cannot be pickled")


class PooledHandle(Handle):
    """A subclass: the registration of its base applies."""


fncache.register(Handle, lambda h: h.url)


class Model:
    """A loaded model: keyed by name and version (``__fncache_token__``), never its weights."""

    def __init__(self, name, version):
        self.name = name
        self.version = version
        self.weights = object()  # not picklable content

    def __reduce__(self):
        raise TypeError("a Model cannot be pickled")

    def __fncache_token__(self):
        return (self.name, self.version)


def score(handle, model, extra=()):
    return len(handle.url) + model.version + len(extra)


def digests(_=None):
    """What this process makes of the hooked types, nested in containers and as call arguments."""
    nested = [{"h": (Handle("db://a"),), "s": {PooledHandle("db://b")}}, [Model("m", 1)]]
    return {
        "nested": fncache.hash(nested),
        "handle": fncache.hash(Handle("db://a")),
        "model": fncache.hash(Model("m", 1)),
        "key": fncache.key_for(score, Handle("db://a"), Model("m", 1), extra=[Model("n", 2)]),
    }
