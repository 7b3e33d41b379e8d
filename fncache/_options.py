"""The options of a memoized function: declared once, validated once, one frozen value.

Each option is declared once, as a field of :class:`Options` whose metadata is its :class:`Option`
row: the type ``memoize`` accepts, its default, its check (the one validation of that option, a
:class:`~fncache.ConfigError` naming it), whether it travels when a memoized function is pickled,
whether ``fncache.Memoized`` shows it as an attribute, and its documentation. :data:`OPTIONS` is that
table. From it follow :meth:`Options.make` (each option's check, then the few rules between options,
all in :meth:`Options.make`), :meth:`Options.pickled` (configuration only: never a secret given in
code), :class:`OptionAttribute` (``m.expire`` on a memoized function) and :func:`options_doc` (the
"Options" section of ``memoize``'s docstring). ``memoize``'s typed overload is the one other copy,
since type checkers need it written out; ``tests/test_options.py`` checks it against the table.

Also here: the process-wide switch ``FNCACHE_DISABLE``, read once at import (reading the environment
on every call cost about a tenth of a hit) and changed at run time with :func:`disable` and
:func:`enable`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar, overload

from fncache import _codec
from fncache._errors import ConfigError
from fncache._records import Frozen, set_fields
from fncache.stores import Store, check_store, public_config

__all__ = ["DISABLED", "OPTIONS", "Option", "OptionAttribute", "Options", "disable", "disabled",
           "enable", "options_doc", "unknown_options"]

T = TypeVar("T")


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to something other than empty/0/false/no/off."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


#: Whether caching is off in this process (``[True]``/``[False]``). Read once per process: a memoized
#: call looks at this list, never at the environment.
DISABLED = [env_flag("FNCACHE_DISABLE")]


def disable() -> None:
    """Turn caching off in this process: every memoized call runs the function, nothing is stored.

    The same as starting the process with ``FNCACHE_DISABLE=1`` (read once, at import).
    """
    DISABLED[0] = True


def enable() -> None:
    """Turn caching back on in this process (after :func:`disable` or ``FNCACHE_DISABLE=1``)."""
    DISABLED[0] = False


def disabled() -> bool:
    """Whether caching is off in this process."""
    return DISABLED[0]


def secrets_from(secret: Any) -> tuple[bytes, ...]:
    """Every accepted key, the signing one first: ``secret`` (one, or a list ``[new, old, ...]``
    for a rotation) or ``$FNCACHE_SECRET``; empty when none is set."""
    if isinstance(secret, (list, tuple)):
        if not secret:
            raise ConfigError("secret: expected a non-empty str or bytes, or a non-empty list of them")
        return tuple(secret_from(s) or b"" for s in secret)
    one = secret_from(secret)
    return () if one is None else (one,)


def secret_from(secret: str | bytes | None) -> bytes | None:
    """The signing key: ``secret`` or ``$FNCACHE_SECRET``, as bytes; None when neither is set."""
    if secret is None:
        secret = os.environ.get("FNCACHE_SECRET") or None
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes) or not secret:
        raise ConfigError("secret: expected a non-empty str or bytes")
    return secret


# -- the checks: given value -> stored value, or a ConfigError naming the option -------------------

def _names(option: str, kind: str) -> Callable[[Any], tuple[str, ...]]:
    """The check of an option that lists names: a bare string is refused, with the list spelling."""

    def check(names: Any) -> tuple[str, ...]:
        if isinstance(names, str):
            raise ConfigError(f"{option}: expected a list of {kind} names, not a single string; "
                              f"write {option}=[{names!r}]")
        return tuple(sorted(names))

    return check


def _global_names(names: Any) -> tuple[str, ...]:
    """``ignore_globals`` as a sorted tuple of identifiers (each once)."""
    if isinstance(names, str):
        _names("ignore_globals", "global")(names)  # refused, with the list spelling
    try:
        given = list(names)
    except TypeError:
        raise ConfigError(f"ignore_globals: expected a list of global names, got "
                          f"{type(names).__name__}") from None
    for name in given:
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"ignore_globals: expected global names (identifiers), got {name!r}")
    return tuple(sorted(set(given)))


def _positive_seconds(value: Any) -> bool:
    """Whether ``value`` is a finite positive number (not a bool, not NaN, not infinity)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


def _seconds(option: str, optional: bool) -> Callable[[Any], float | None]:
    def check(value: Any) -> float | None:
        if value is None and optional:
            return None
        if not _positive_seconds(value):
            raise ConfigError(f"{option}: expected a positive number of seconds, got {value!r}")
        return value if optional else float(value)

    return check


def _flag(option: str, none: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if none and value is None:
            return None
        if not isinstance(value, bool):  # lock="no" would mean True
            raise ConfigError(f"{option}: expected True{', False or None' if none else ' or False'}, "
                              f"got {value!r}")
        return value

    return check


def _one_of(option: str, *allowed: Any) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in allowed:
            if allowed[0] is None:
                raise ConfigError(f"{option}: expected None or {allowed[1]!r}, got {value!r}")
            raise ConfigError(f"{option}: expected one of {allowed}, got {value!r}")
        return value

    return check


def _version(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"version: expected a str, got {type(value).__name__}")
    return value


def _store(store: Any) -> Any:
    """The store spec (a list of tiers as a tuple); what opening it needs is checked in ``make``."""
    tiers = store if isinstance(store, (list, tuple)) else [store]
    if not tiers:
        raise ConfigError("store: an empty list of tiers")
    for tier in tiers:
        alone_none = tier is None and len(tiers) == 1  # None: the default store
        if not alone_none and not isinstance(tier, (str, os.PathLike, Store)):
            raise ConfigError(
                f"store: expected a path, a URL, a Store or a list of them (tiers, nearest first), "
                f"got {type(tier).__name__}")
    return tuple(store) if isinstance(store, list) else store


def _store_options(options: Any) -> dict[str, Any]:
    if options is not None and not isinstance(options, dict):
        raise ConfigError("store_options: expected a dict")
    return dict(options or {})


def _depends_on(depends_on: Any) -> tuple[Any, ...]:
    """``depends_on`` as a tuple; a bare string or path is refused rather than guessed at.

    A string is iterable, so ``depends_on="data.csv"`` would depend on the files ``d``, ``a``, ...
    (and ``"."`` on the whole working directory): refused, with the list spelling as the hint.
    """
    if isinstance(depends_on, (str, bytes, os.PathLike)):
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got the single {type(depends_on).__name__} "
            f"{depends_on!r}; write depends_on=[{depends_on!r}]"
        )
    try:
        return tuple(depends_on)
    except TypeError:
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got {type(depends_on).__name__}"
        ) from None


def _verbose(value: Any) -> bool:
    value = _flag("verbose", none=True)(value)
    return env_flag("FNCACHE_VERBOSE") if value is None else bool(value)


# -- the table ---------------------------------------------------------------------------------

class Option(NamedTuple):
    """One option of ``memoize``, as declared on :class:`Options` (see :data:`OPTIONS`)."""

    #: the type ``memoize`` accepts, as its overload writes it
    given: str
    #: the value when the option is not given
    default: Any
    #: the one validation: the given value -> the stored one, or a ConfigError naming the option
    check: Callable[[Any], Any]
    #: what ``memoize``'s docstring says of it (empty: an option of the library's own layers)
    doc: str = ""
    #: sent when a memoized function is pickled to another process
    pickled: bool = True
    #: shown as an attribute of a memoized function (``m.expire``)
    shown: bool = True
    name: str = ""

    @property
    def public(self) -> bool:
        """Whether ``memoize``'s signature and docstring name it."""
        return bool(self.doc)


def _option(default: Any, given: str, check: Callable[[Any], Any], doc: str = "", *,
            pickled: bool = True, shown: bool = True, stored: Any = dataclasses.MISSING,
            repr: bool = True) -> Any:
    """A field of :class:`Options` carrying its :class:`Option` row; ``stored``: the field's own
    default when it is not ``check(default)`` computed once (a mutable or environment-read one)."""
    row = Option(given, default, check, textwrap.dedent(doc).strip(), pickled, shown)
    if stored is dict:
        return dataclasses.field(default_factory=dict, metadata={"option": row})
    value = default if stored is dataclasses.MISSING else stored
    return dataclasses.field(default=value, repr=repr, metadata={"option": row})


@dataclass(init=False, repr=False, eq=False)  # frozen: its methods, see fncache._records
class Options(Frozen):
    """Validated options of one memoized function (see :func:`fncache.memoize` for each)."""

    store: Any = _option(None, "str | os.PathLike[str] | Store | list[Any] | tuple[Any, ...] | None",
                         _store, """
        a directory, a URL (``file://``, ``memory://``, ``redis://``, ``s3://``) or a
        :class:`~fncache.stores.Store`; default ``$FNCACHE_STORE``, ``$FNCACHE_DIR`` or
        ``~/.cache/fncache``. A list of them (or one string joined by commas) is tiers,
        nearest first: ``["~/.cache/team", "s3://bucket/cache"]`` reads the local directory
        first and copies what the bucket has into it (:mod:`fncache.stores.tiered`); then
        ``store_options`` takes ``tiers`` (one dict of options per tier) and ``cooldown``.
        """, shown=False)
    ignore: tuple[str, ...] = _option((), "Iterable[str]", _names("ignore", "parameter"), """
        parameter names left out of the key (e.g. ``verbose``, ``n_jobs``).
        """)
    ignore_globals: tuple[str, ...] = _option((), "Iterable[str]", _global_names, """
        names of globals that are state the function writes, not inputs (a call
        log, a metrics list): left out of the key and of the check that no input changed
        while the function ran, wherever the function or its helpers read them. Your word
        against fncache's: a global named here that the result does depend on gives stale
        hits. ``explain`` lists them.
        """)
    files: tuple[str, ...] = _option((), "Iterable[str]", _names("files", "parameter"), """
        parameter names that always take file paths (or lists of them, or None): each is
        keyed by the file's base name and content, as ``fncache.file(path)`` is; the function
        still receives the path as passed. An open file object is refused there (and in
        any argument): pass the path.
        """)
    version: str | None = _option(None, "str | None", _version, """
        a string that replaces the code fingerprint: entries stay valid across code edits
        until you change it.
        """)
    expire: float | None = _option(None, "float | None", _seconds("expire", optional=True), """
        seconds after which an entry is a miss (and is removed).
        """)
    lock: bool = _option(False, "bool", _flag("lock"), """
        also compute each key once across *processes* (a store lock, expiring after
        ``lock_timeout``); threads of one process always compute a key once.
        """)
    lock_timeout: float = _option(600.0, "float", _seconds("lock_timeout", optional=False), """
        seconds after which a process lock (``lock=True``) expires; default 600.
        """)
    secret: bytes | None = _option(None, "str | bytes | list[str | bytes] | tuple[str | bytes, ...] | None",
                                   secrets_from, """
        sign entries (HMAC-SHA256) and refuse unsigned or mis-signed ones; default
        ``$FNCACHE_SECRET``. A list ``[new, old, ...]`` signs with the first and accepts
        any (a rotation). Never pickled with the function: a worker without
        ``$FNCACHE_SECRET`` warns once and does not cache it (no unsigned entry is read or
        written there).
        """, pickled=False, shown=False, repr=False)
    #: every secret an entry may be signed with (``secret`` first, then older ones): for reading.
    #: Not an option: made from ``secret`` by :meth:`make`.
    accepted: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)
    #: a secret was configured where the function was made; without one here it is not cached
    signed: bool = _option(False, "bool", _flag("signed"), shown=False)
    compress: str | None = _option(None, "Any", _codec.check_compress, """
        ``"zstd"``, ``"lz4"`` or ``True`` (zstd).
        """)
    on_unhashable: str = _option("raise", "str", _one_of("on_unhashable", "raise", "call"), """
        ``"raise"`` (:class:`~fncache.UnhashableArgument`) or ``"call"`` (run
        uncached, warn once).
        """)
    on_store_error: str = _option("log", "str", _one_of("on_store_error", "log", "raise"), """
        ``"log"`` (a store failure is a logged miss) or ``"raise"``.
        """)
    depends_on: tuple[Any, ...] = _option((), "Iterable[Any]", _depends_on, """
        a list of extra inputs the code does not show: objects, or paths whose content
        counts. A bare string or path is refused (``depends_on=["data.csv"]``, not
        ``depends_on="data.csv"``, which would otherwise be read one character at a time).
        """)
    track_versions: bool = _option(False, "bool", _flag("track_versions"), """
        add the versions of the distributions the code reaches to the key.
        """)
    store_options: dict[str, Any] = _option(None, "dict[str, Any] | None", _store_options, """
        keyword options for opening ``store`` (e.g. ``size_limit``); unknown
        ones, a malformed store URL and invalid values are refused here. Credentials given
        here or in the URL are used but never pickled with the function nor shown in its
        ``repr``: workers take them from their environment (see :mod:`fncache.stores`).
        """, shown=False, stored=dict)
    verbose: bool = _option(None, "bool | None", _verbose, """
        one line per call on stderr, a miss with its reason (what differs from the
        nearest stored entry) and then its duration; default ``$FNCACHE_VERBOSE``. See
        :mod:`fncache._verbose` for the bounded work this does.
        """, stored=False)
    mmap_mode: str | None = _option(None, "str | None", _one_of("mmap_mode", None, "r"), """
        ``"r"`` returns arrays of large results (stored in files, over 32 KiB) as
        read-only memory maps of the entry's file, as ``numpy.load(mmap_mode="r")`` does:
        loading takes about a millisecond whatever the size, and pages are read when used.
        The header and pickle are verified; the array bytes are not (without a secret), since
        checking them would read them all. Stores without files (memory, Redis, S3) ignore it.
        """)

    def __init__(self, **given: Any) -> None:
        set_fields(self, given)  # the fields by name: generated, this cost every import 0.4 ms

    @classmethod
    def make(cls, **given: Any) -> Options:
        """Check every option and return them as one frozen value; raises :class:`ConfigError`.

        Each option is checked by its own row of :data:`OPTIONS`; the rules between options
        follow here, and nowhere else.
        """
        unknown = unknown_options("Options", given, OPTIONS)
        if unknown:
            raise ConfigError(unknown)
        values = {name: row.check(given.get(name, row.default)) for name, row in OPTIONS.items()}
        # An unknown URL scheme, a bad Redis URL, chunk_size=0, size_limit=-1 or an unknown store
        # option fails here, not at the first call.
        check_store(values["store"], dict(values["store_options"]))
        accepted = values["secret"]
        values["secret"] = accepted[0] if accepted else None
        values["signed"] = values["signed"] or values["secret"] is not None
        if values["secret"] is not None and values["mmap_mode"] == "r":
            warn_mapped_and_signed()
        return cls(accepted=accepted, **values)

    def pickled(self, store: Store | None = None) -> dict[str, Any]:
        """The keyword options that rebuild these in another process (:meth:`make` accepts them).

        A secret given in code is left out (it would travel in clear): workers take theirs from
        ``$FNCACHE_SECRET``; ``signed`` travels instead, so that a worker without it does not
        silently read and write unsigned entries for this function. So are store credentials (a
        password in the URL or store_options, an S3 secret): workers take them from their
        environment ($REDIS_PASSWORD, AWS_*), see :mod:`fncache.stores`. ``store``: the opened
        store, sent instead of a Store option (a store pickles as its URL and options).
        """
        sent = {name: getattr(self, name) for name, row in OPTIONS.items() if row.pickled}
        spec = store if isinstance(self.store, Store) and store is not None else self.store
        sent["store"], sent["store_options"] = public_config(spec, self.store_options)
        return sent

    def replace(self, **changes: Any) -> Options:
        """A copy with some fields changed (already-validated values only)."""
        return dataclasses.replace(self, **changes)


#: The options table, in declaration order: name -> :class:`Option` (``Options`` fields carrying one).
OPTIONS: dict[str, Option] = {
    f.name: f.metadata["option"]._replace(name=f.name)
    for f in dataclasses.fields(Options) if "option" in f.metadata
}

#: The names ``memoize`` accepts as options.
NAMES = frozenset(OPTIONS)


class OptionAttribute(Generic[T]):
    """An attribute of a memoized function that reads one option (``m.expire``).

    Named by the attribute it is assigned to; a tuple of names reads as a list (``m.ignore``).
    """

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in OPTIONS or not OPTIONS[name].shown:
            raise TypeError(f"{owner.__name__}.{name}: not an option shown as an attribute")
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> OptionAttribute[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj.options, self.name)
        return list(value) if OPTIONS[self.name].given == "Iterable[str]" else value

    def __set__(self, obj: Any, value: Any) -> None:
        # Read-only, as a property without a setter: the options are one frozen value.
        raise AttributeError(f"{type(obj).__name__}.{self.name}: options are read-only; "
                             f"memoize the function again with {self.name}={value!r}")


def options_doc(indent: str = "    ") -> str:
    """The "Options" section of ``memoize``'s docstring, from the table."""
    lines = [f"\n{indent}Options:"]
    for name, row in OPTIONS.items():
        if row.public:
            lines.extend(_filled(f"{name}: {row.doc}", 96, indent * 2, indent * 3))
    return "\n".join(lines) + "\n"


def _filled(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text``'s words in lines of at most ``width`` characters (a longer word alone on its
    line), the first indented by ``first``, the others by ``rest``: ``textwrap.fill`` without its
    hyphen rules, which took half a millisecond of every import for this docstring."""
    lines: list[str] = []
    line = first
    for word in text.split():
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = rest
        line += (" " if line.strip() else "") + word
    lines.append(line)
    return lines


_WARNED_MAPPED: list[bool] = []


def warn_mapped_and_signed() -> None:
    """Say once per process what a secret cannot protect under ``mmap_mode="r"``.

    Kept rather than refused or silently copied: mapping is what the option is for, and what a
    writer of the file can still do to a mapped array (change its numbers, truncate the file) runs
    no code. The pickle is always verified and loaded from a private copy (see ``_codec._split``).
    """
    if _WARNED_MAPPED:
        return
    _WARNED_MAPPED.append(True)
    import logging

    logging.getLogger("fncache").warning(
        "mmap_mode='r' with a secret: the signature is checked when an entry is loaded, but the "
        "mapped array bytes stay shared with the store's file; anyone who can write that file "
        "can change the array's values afterwards, or truncate it and kill this process with "
        "SIGBUS (no code can run). Leave mmap_mode unset where others can write the store.")


def unknown_options(where: str, given: Iterable[str], names: Iterable[str]) -> str | None:
    """The message refusing the names in ``given`` that are not in ``names``, each with the
    nearest valid one (``memoize: unknown option 'expir'; did you mean 'expire'?``), or None."""
    import difflib

    valid = sorted(names)
    unknown = sorted(set(given) - set(valid))
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        parts.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"{where}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(parts)}"
