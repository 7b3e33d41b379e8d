"""Arguments of a call -> the canonical tuple that enters its key.

``f(1)``, ``f(a=1)`` and ``f(1, b=<default>)`` are one call: arguments are bound to the signature with
defaults applied, ordered by parameter, ignored parameters dropped. Named parameters are bound by name,
so their order in the call does not count; the items that land in ``**kwargs`` keep the order they were
passed in, because the function can observe it (``list(kwargs)``, a DataFrame's column order). The
common case (positional arguments only, no ``*args``/``**kwargs`` in the signature) skips
``inspect.Signature.bind``, which costs several microseconds a call.

Parameters named in ``files=`` enter the key as :class:`fncache.values.files.File` (name and content of the
file), whatever path type they were given as; the function itself still receives what was passed.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any

from fncache._errors import ConfigError
from fncache.values.files import file_argument

__all__ = ["Binder"]

_P = inspect.Parameter


class Binder:
    """Binds calls of one function; built once per memoized function."""

    def __init__(self, func: Callable[..., Any], ignore: Iterable[str] = (),
                 files: Iterable[str] = ()) -> None:
        # A bound method (``self.f = memoize(self.f)``, joblib's ``memory.cache(self.f)``): its
        # instance is bound as the first argument, so the instance's content is keyed afresh on every
        # call like any argument (and ``ignore=["self"]`` works), never as a value the code reads.
        self.bound, func = _unbound(func)
        ignore, files = tuple(ignore), tuple(files)
        self.signature = _signature(func, (*ignore, *files))
        # What the signature was read from (defaults, code, a partial's keywords, a callable
        # object's __call__, the wrapped function where it binds): see current().
        self._source = _source_of(func)
        if self.signature is not None and getattr(func, "__wrapped__", None) is not None:
            self._source = ("wrapped", self._source, _source_of(inspect.unwrap(func)))
        params = list(self.signature.parameters.values()) if self.signature else []
        names = [p.name for p in params]
        #: The first parameter's name (a method's ``self``), or None.
        self.first: str | None = names[0] if names else None
        self.ignore, self.files = _checked_options(func, self.signature, params, ignore, files)
        self.names = tuple(n for n in names if n not in self.ignore)
        # (position in the bound values, parameter name) of each parameter that takes files
        self._files = _file_positions(self.names, self.files)
        if not self._files:
            self.bind = self._bind  # type: ignore[method-assign]  # one call less on every hit
        self._keep = _kept_positions(names, self.ignore)
        self._kinds = tuple(p.kind for p in params)
        self._simple = _positional(params)
        self._n = len(params)
        self._tails = _tails(params)
        self._as_given = _as_given(self.signature, params, self.ignore)

    def current(self) -> bool:
        """Whether the signature still stands as read: the function's code, defaults and keyword
        defaults (and a partial's keywords) are the objects they were, the keyword defaults' items
        too. Checked when the fingerprint is made again (which watches the same attributes), not
        on every call; a binder that no longer stands is made again, or a call given its old
        default explicitly would share the key of one that now gets the new default."""
        return _unchanged(self._source)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Values in parameter order (``*args`` as a tuple, ``**kwargs`` as pairs in call order),
        ``files=`` parameters as :class:`~fncache.values.files.File`.

        Raises ``TypeError`` exactly as calling the function would, for a call that does not fit;
        :class:`~fncache.ArgumentTypeError` for a ``files=`` parameter given something not a path.
        """
        values = self._bind(args, kwargs)
        if not self._files:
            return values
        out = list(values)
        for i, name in self._files:
            out[i] = file_argument(out[i], name)
        return tuple(out)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if self.bound:
            args = self.bound + args
        if self._as_given:
            return (args, tuple(kwargs.items()))
        if self._simple and not kwargs and len(args) <= self._n:
            tail = self._tails[len(args)]
            if tail is not None:
                values = args + tail if tail else args
                if self.ignore:
                    return tuple(values[i] for i in self._keep)
                return values
        return self._bind_by_signature(self.signature, args, kwargs)  # type: ignore[arg-type]

    def _bind_by_signature(self, signature: inspect.Signature, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """What :meth:`_bind` gives for a call its positional fast path does not take, through
        ``inspect.Signature.bind`` (several microseconds: one call more is noise here)."""
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out = []
        for (name, value), kind in zip(bound.arguments.items(), self._kinds, strict=True):
            if name in self.ignore:
                continue
            if kind is _P.VAR_KEYWORD:
                value = tuple(value.items())
            out.append(value)
        return tuple(out)


def _unbound(func: Callable[..., Any]) -> tuple[tuple[Any, ...], Callable[..., Any]]:
    """``(instance,)`` and the function of a bound method; ``()`` and ``func`` itself otherwise."""
    if isinstance(func, types.MethodType):
        return (func.__self__,), func.__func__
    return (), func


def _as_given(signature: inspect.Signature | None, params: list[inspect.Parameter],
              ignore: frozenset[str]) -> bool:
    """Whether calls are keyed as given, without ``bind()``: no signature (some builtins), or
    ``(*args, **kwargs)`` alone (a decorator's wrapper) with nothing ignored."""
    return signature is None or (
        [p.kind for p in params] == [_P.VAR_POSITIONAL, _P.VAR_KEYWORD] and not ignore)


def _positional(params: list[inspect.Parameter]) -> bool:
    """Whether every parameter can be given by position (no ``*args``, ``**kwargs`` or keyword-only
    parameter), so that a call with positional arguments only needs no ``Signature.bind``."""
    return all(p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD) for p in params)


def _file_positions(names: tuple[str, ...], files: frozenset[str]) -> tuple[tuple[int, str], ...]:
    """``(position, name)`` of each of the bound ``names`` that takes files."""
    return tuple((i, n) for i, n in enumerate(names) if n in files)


def _kept_positions(names: list[str], ignore: frozenset[str]) -> tuple[int, ...]:
    """The positions of the parameters ``names`` that are not ignored."""
    return tuple(i for i, n in enumerate(names) if n not in ignore)


def _tails(params: list[inspect.Parameter]) -> list[tuple[Any, ...] | None]:
    """tails[k]: the defaults that complete a call given k positional arguments (None: none do)."""
    defaults = [p.default for p in params]
    return [tuple(defaults[k:]) if all(d is not _P.empty for d in defaults[k:]) else None
            for k in range(len(params) + 1)]


def _checked_options(func: Any, signature: inspect.Signature | None,
                     params: list[inspect.Parameter], ignore: Iterable[str],
                     files: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """``ignore=`` and ``files=`` as sets of parameter names, checked against the signature and
    each other; a ConfigError naming the option otherwise."""
    known = [p.name for p in params] if signature is not None else None
    ignored = _checked_names("ignore", func, ignore, known)
    file_names = _checked_names("files", func, files, known)
    if file_names and signature is None:
        raise ConfigError(f"files: the parameters of {getattr(func, '__qualname__', func)} are "
                          "unknown (no signature); wrap the arguments in fncache.file() instead")
    both = file_names & ignored
    if both:
        raise ConfigError(f"files: {', '.join(sorted(both))} also listed in ignore=")
    for p in params:
        if p.name in file_names and p.kind is _P.VAR_KEYWORD:
            raise ConfigError(f"files: {p.name!r} is a **{p.name} parameter; name the keyword "
                              "parameters that take files instead")
    return ignored, file_names


def _source_of(func: Any) -> tuple[Any, ...] | None:
    """What ``func``'s signature is read from, as objects to compare by identity (None: nothing
    that changes in place: a builtin, a class)."""
    if isinstance(func, functools.partial):
        return ("partial", func, tuple(func.keywords.items()), _source_of(func.func))
    if isinstance(func, types.FunctionType):
        kw = func.__kwdefaults__
        return ("function", func, func.__code__, func.__defaults__, kw,
                tuple(kw.items()) if kw else ())
    call = _call_of(func)
    if isinstance(call, types.FunctionType):  # a callable object: its class's __call__
        return ("object", func, call, _source_of(call))
    return None


def _call_of(obj: Any) -> Any:
    return inspect.getattr_static(type(obj), "__call__", None)


def _unchanged(source: tuple[Any, ...] | None) -> bool:
    return source is None or _UNCHANGED[source[0]](source)


def _function_unchanged(source: tuple[Any, ...]) -> bool:
    _, fn, code, defaults, kw, items = source
    return (fn.__code__ is code and fn.__defaults__ is defaults and fn.__kwdefaults__ is kw
            and (not items or _same_items(kw, items)))


_UNCHANGED: dict[str, Callable[[tuple[Any, ...]], bool]] = {
    "function": _function_unchanged,
    "partial": lambda s: _same_items(s[1].keywords, s[2]) and _unchanged(s[3]),
    "object": lambda s: _call_of(s[1]) is s[2] and _unchanged(s[3]),
    "wrapped": lambda s: _unchanged(s[1]) and _unchanged(s[2]),
}


def _same_items(mapping: dict[str, Any], items: tuple[tuple[str, Any], ...]) -> bool:
    return len(mapping) == len(items) and all(mapping.get(k, _P.empty) is v for k, v in items)


def _signature(func: Callable[..., Any], named: tuple[str, ...] = ()) -> inspect.Signature | None:
    """The function's own signature: a decorator's wrapper (``functools.wraps`` sets
    ``__wrapped__``, which inspect follows by default) may take other parameters or defaults than
    the function it wraps, and the wrapper is what the call runs. Only where ``ignore=`` or
    ``files=`` name parameters the wrapper does not have but the wrapped function does (as
    ``joblib.Memory`` users write them) is the call bound by the wrapped function's signature."""
    try:
        own = inspect.signature(func, follow_wrapped=False)
        if named and not set(named) <= set(own.parameters):
            inner = inspect.signature(func)
            if set(named) <= set(inner.parameters):
                return inner
        return own
    except (TypeError, ValueError):
        # Some builtins have no signature: take the arguments as given, keyword order included
        # (which of them are named parameters is unknown).
        return None


def _checked_names(option: str, func: Any, given: Iterable[str],
                   names: list[str] | None) -> frozenset[str]:
    """``ignore=`` or ``files=`` as a set, each a parameter name (``names`` is None when the
    signature is unknown); a ConfigError naming the option otherwise."""
    given = list(given)
    for name in given:
        if not isinstance(name, str):
            raise ConfigError(f"{option}: expected parameter names, got {name!r}")
        if names is not None and name not in names:
            raise ConfigError(
                f"{option}: {name!r} is not a parameter of {getattr(func, '__qualname__', func)}"
                f" (parameters: {', '.join(names) or 'none'})"
            )
    return frozenset(given)
