"""The methods a dataclass would generate, written once: ``__repr__`` over the fields
(:class:`Shown`), ``__eq__`` and ``__hash__`` too (:class:`Record`), and a frozen one's refusal to
assign (:class:`Frozen`, for the options only: a class declared ``frozen=False`` to
``dataclasses``, which the public records are not).

``@dataclass`` makes each method it adds from source text and compiles it: a frozen dataclass took
0.45 ms to create, paid at import by every process (after scikit-learn's import, the store's
records, the options and the fingerprint were 2.7 ms of fncache's 20 ms import). Classes on the
import path are decorated ``@dataclass(repr=False, eq=False)`` (and ``init=False`` where their
``__init__`` is written out; ``frozen=True`` stays where it was, so that subclasses and
``dataclasses`` see the same class) and take these methods instead. They stay dataclasses
(``dataclasses.fields``, ``replace`` and ``asdict`` work) and behave as the generated methods of
the running Python do: equal only to an instance of the same class with equal compared fields
(compared as a tuple before 3.13, field by field from 3.13 on: a NaN field is then never equal),
hashed by those fields, shown by the fields whose ``repr`` is on.
"""

from __future__ import annotations

import dataclasses
import reprlib
import sys
from typing import Any

__all__ = ["Frozen", "Record", "Shown", "set_fields"]

_compared: dict[type, tuple[str, ...]] = {}


def _compared_names(cls: type) -> tuple[str, ...]:
    names = _compared.get(cls)
    if names is None:
        names = _compared[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return names


def set_fields(record: Any, given: dict[str, Any]) -> None:
    """A dataclass's ``__init__`` taking its fields by name (for one decorated ``init=False``
    with many fields): each given value, else its default or a new one from its factory; a
    missing or unknown name raises ``TypeError``, as the generated one does."""
    values = dict(given)
    for f in dataclasses.fields(record):
        if f.name in values:
            value = values.pop(f.name)
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            raise TypeError(f"{type(record).__qualname__}() missing a value for {f.name!r}")
        object.__setattr__(record, f.name, value)
    if values:
        raise TypeError(f"{type(record).__qualname__}() got unknown fields {sorted(values)}")


class Shown:
    """``__repr__`` of a dataclass, for one decorated with ``repr=False``."""

    __slots__ = ()

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                          for f in dataclasses.fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"


class Record(Shown):
    """``__eq__``, ``__hash__`` and ``__repr__`` of a dataclass, for one decorated with
    ``repr=False, eq=False``."""

    __slots__ = ()

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _compared_names(type(self)))

    if sys.version_info >= (3, 13):
        def __eq__(self, other: object) -> Any:
            if self is other:
                return True
            if other.__class__ is not self.__class__:
                return NotImplemented
            result: Any = True  # ``a == b and c == d``, as the generated method reads
            for name in _compared_names(type(self)):
                result = getattr(self, name) == getattr(other, name)
                if not result:
                    return result
            return result
    else:
        def __eq__(self, other: object) -> Any:
            if other.__class__ is not self.__class__:
                return NotImplemented
            return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())


class Frozen(Record):
    """A frozen dataclass's refusal to assign or delete any attribute, for a class made from
    keywords by :func:`set_fields` (the options: internal, never subclassed) and declared
    ``frozen=False``, so that ``dataclasses`` makes no ``__setattr__`` for it (0.2 ms of every
    import for the options' 25 fields)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
