"""Arguments of a call -> the canonical tuple that enters its key.

``f(1)``, ``f(a=1)`` and ``f(1, b=<default>)`` are one call: arguments are bound to the signature with
defaults applied, ordered by parameter, ignored parameters dropped. Named parameters are bound by name,
so their order in the call does not count; the items that land in ``**kwargs`` keep the order they were
passed in, because the function can observe it (``list(kwargs)``, a DataFrame's column order). The
common case (positional arguments only, no ``*args``/``**kwargs`` in the signature) skips
``inspect.Signature.bind``, which costs several microseconds a call.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any

from fncache._errors import ConfigError

__all__ = ["Binder"]

_P = inspect.Parameter


class Binder:
    """Binds calls of one function; built once per memoized function."""

    def __init__(self, func: Callable[..., Any], ignore: Iterable[str] = ()) -> None:
        # A bound method (``self.f = memoize(self.f)``, joblib's ``memory.cache(self.f)``): its
        # instance is bound as the first argument, so the instance's content is keyed afresh on every
        # call like any argument (and ``ignore=["self"]`` works), never as a value the code reads.
        self.bound: tuple[Any, ...] = ()
        if isinstance(func, types.MethodType):
            self.bound = (func.__self__,)
            func = func.__func__
        self.signature = _signature(func)
        params = list(self.signature.parameters.values()) if self.signature else []
        names = [p.name for p in params]
        self.ignore = _checked_ignore(func, ignore, names if self.signature is not None else None)
        self.names = tuple(n for n in names if n not in self.ignore)
        self._keep = tuple(i for i, n in enumerate(names) if n not in self.ignore)
        self._kinds = tuple(p.kind for p in params)
        self._simple = all(p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD) for p in params)
        self._n = len(params)
        defaults = [p.default for p in params]
        # tails[k]: the defaults that complete a call given k positional arguments
        self._tails = [
            tuple(defaults[k:]) if all(d is not _P.empty for d in defaults[k:]) else None
            for k in range(self._n + 1)
        ]

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Values in parameter order (``*args`` as a tuple, ``**kwargs`` as pairs in call order).

        Raises ``TypeError`` exactly as calling the function would, for a call that does not fit.
        """
        if self.bound:
            args = self.bound + args
        if self.signature is None:
            return (args, tuple(kwargs.items()))
        if self._simple and not kwargs and len(args) <= self._n:
            tail = self._tails[len(args)]
            if tail is not None:
                values = args + tail if tail else args
                if self.ignore:
                    return tuple(values[i] for i in self._keep)
                return values
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out = []
        for (name, value), kind in zip(bound.arguments.items(), self._kinds, strict=True):
            if name in self.ignore:
                continue
            if kind is _P.VAR_KEYWORD:
                value = tuple(value.items())
            out.append(value)
        return tuple(out)


def _signature(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        # Some builtins have no signature: take the arguments as given, keyword order included
        # (which of them are named parameters is unknown).
        return None


def _checked_ignore(func: Any, ignore: Iterable[str], names: list[str] | None) -> frozenset[str]:
    """``ignore=`` as a set, each a parameter name (``names`` is None when the signature is unknown)."""
    ignore = list(ignore)
    for name in ignore:
        if not isinstance(name, str):
            raise ConfigError(f"ignore: expected parameter names, got {name!r}")
        if names is not None and name not in names:
            raise ConfigError(
                f"ignore: {name!r} is not a parameter of {getattr(func, '__qualname__', func)}"
                f" (parameters: {', '.join(names) or 'none'})"
            )
    return frozenset(ignore)
