"""Functions benchmarked as importable module functions (the ``__main__`` twins live in runner)."""

import dataclasses

from benchmarks import _state


@dataclasses.dataclass
class Record:
    """A small user record: lists of them are hashed (a user class, keyed by its code)."""

    x: int
    name: str


@dataclasses.dataclass
class Settings:
    """Settings with a default factory: its generated ``__init__`` holds dataclasses' sentinels."""

    scale: int = 1
    tags: list[str] = dataclasses.field(default_factory=list, metadata={"unit": "none"})


def small(a: int, b: str) -> int:
    return a + len(b)


def with_settings(a: int, b: str) -> int:
    """``small`` through a dataclass (a hit checks what the code read: the class and its fields)."""
    return a * Settings().scale + len(b)


def full(n: int, size: int) -> object:
    import numpy as np

    return np.full(size, float(n))


def prepared(n: int) -> object:
    """The value the runner prepared (``n`` only makes a new key: a miss per call)."""
    return _state.VALUE


#: A large value that ``through_helper`` reaches through ``_big`` (set by the runner): by content in
#: its key, as a user's global is.
BIG: object = None


def _big() -> object:
    return BIG


def through_helper(n: int) -> object:
    """The runner's large global, reached through a helper (``n`` only makes a new key)."""
    return _big()


def given(value: object) -> object:
    """Its argument (a store of a value hashed as an argument)."""
    return value
