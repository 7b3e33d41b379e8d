"""What a function *is*, for caching: a digest of its code and of everything user-written it reaches.

A fingerprint is a set of named *components*, each with a digest:

* ``function NAME``: a function's code (bytecode, constants, names, argument spec, flags), defaults and
  keyword defaults; never its file name, line numbers, line table or docstring;
* ``global NAME`` / ``closure FN.VAR``: a value the code reads, by content; a user-written function or
  class read this way is a reference to its own component, so helpers of helpers are covered and
  cycles (recursion, a method that reads its own class) end by themselves;
* ``class NAME``: a user class's sorted attribute dict (methods as references), bases and metaclass;
* ``attr MODULE.NAME``: a module-level value of a user module read as ``module.NAME``; a random
  generator's method read through a library module (``random.randint``), by the generator's state.

"User code" is code outside the standard library and installed distributions (site-packages): scripts,
``__main__``, notebooks, ``exec``-made functions, local modules, editable installs. Library code enters
by reference (module and qualified name); :func:`track`/:func:`untrack` widen or narrow the set. Names
of the root function's own module are written without the module prefix (``__main__`` or imported).

A fingerprint is computed once per function and then *revalidated* on each use: every global lookup,
``__code__``/``__defaults__``/closure cell and user class dict it depended on is checked by identity,
and mutable values read are re-hashed. Any difference recomputes it (a global rebound or mutated
between two calls gives a new key), while a hit costs a few identity checks.

State a function writes is keyed by the name it is read under and its first value, not by its content
now, for that function only: a global its code rebinds (``global n; n += 1``) and the values memoize
saw it modify while it ran (:func:`mark_state`, :mod:`fncache.code.state`; listed by ``by_name``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fncache import _forks
from fncache._errors import ArgumentTypeError
from fncache._records import Shown
from fncache.code import usercode as _usercode
from fncache.code.classify import describe, holds_user_code
from fncache.code.distributions import distribution_versions
from fncache.code.state import MISSING, SLOW_REHASH
from fncache.code.usercode import is_user_code, is_user_module, track, untrack, unwrap_memoized, whole_module
from fncache.values import hasher as _hasher
from fncache.values import registry as _registry

if TYPE_CHECKING:
    from fncache.code.walk import Walk

__all__ = ["Fingerprint", "fingerprint", "is_user_module", "still_valid", "track", "untrack"]

log = logging.getLogger("fncache")


# ---------------------------------------------------------------------------------------------
# How the hasher keys functions, classes and code: registered here, so the value wing never imports
# the code wing (see fncache.values.registry)
# ---------------------------------------------------------------------------------------------


def _function_token(h: Any, obj: Any) -> Any:
    return _once_per_hash(h, obj, _function_token_of)


def _function_token_of(h: Any, obj: Any) -> Any:
    return _registry.token("function", fingerprint(obj).digest)


def _class_token(h: Any, obj: Any) -> Any:
    return _once_per_hash(h, obj, _class_token_of)


def _class_token_of(h: Any, obj: Any) -> Any:
    # A fingerprint says what a class does, not which class it is: two modules may define one body
    # under one name, and ``except a.NotFound`` does not catch ``b.NotFound``. Classes of the root
    # module (the memoized function's own) leave the module out (see the hasher's docstring).
    module = getattr(obj, "__module__", None)
    where = None if h.root is not None and module == h.root else module
    return _registry.token("class", where, fingerprint(obj).digest)


def _once_per_hash(h: Any, obj: Any, make: Callable[[Any, Any], Any]) -> Any:
    """``make(h, obj)``, made once per hash (``h.tokens``; None: every time): each instance of a
    class reduces to the class, and finding and checking its fingerprint re-hashes the mutable
    values it read (a dataclass's fields, 70 us an instance). A token used again is made again
    when the hash ends (``_Hasher.hash``): if the class or what it reads then stands otherwise
    (something the hash ran changed it), the value is hashed again without reusing tokens, each
    occurrence keyed as it then stands. A change undone before the end is not seen: the class is
    keyed as it stands at the start and the end, as the function will see it."""
    memo = h.tokens
    if memo is None:
        return make(h, obj)
    found = memo.get(id(obj))
    if found is not None and found[0] is obj:
        found[3] = True
        return found[1]
    token = make(h, obj)
    memo[id(obj)] = [obj, token, make, False]  # the object held: its id is not reused meanwhile
    return token


def _code_token(h: Any, obj: Any) -> Any:
    from fncache.code.digest import code_digest

    return _registry.token("code", code_digest(obj))


def _module_token(h: Any, obj: Any) -> Any:
    # A library module by name (as the hasher keys it). A user module held by a value (an
    # argument, an entry of a container, an instance's attribute) by the content of every name
    # it defines: the code that receives it may read any of them (``m.helper``), and by name
    # alone an edit of ``helper`` was a stale hit.
    name = obj.__name__
    if not isinstance(name, str) or not is_user_module(name):
        return _registry.token("module", name)
    return _registry.token("module", name, fingerprint(obj).digest)


def _register_code_tokens() -> None:
    for types_, handler, exact in ((type, _class_token, False),
                                   (types.FunctionType, _function_token, True),
                                   (types.CodeType, _code_token, True),
                                   (types.ModuleType, _module_token, True)):
        _registry.register_type(types_, handler, exact=exact, final=True, library="builtins")
    _registry.install_user_code(_user_code_for_values)
    _registry.install_cycle_note(_note_cycle)


def _user_code_for_values(obj: Any) -> bool:
    # is_user_code, for the value handlers: not for a class of no module, nor Cython's shared types
    # (they name a module that is not imported: compiled code, not the user's).
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and not module.startswith("_cython_") and is_user_code(obj)


# A depth no fingerprint computation has: marked, it makes every computation in progress (and the
# ones around them) not cacheable, as a cycle back to an outer root does (see _compute).
_UNROOTED = -1


def _note_cycle() -> None:
    cycles = getattr(_in_progress, "cycles", None)
    if cycles is not None and getattr(_in_progress, "stack", None):
        cycles.add(_UNROOTED)


_register_code_tokens()


# Compared by identity; __repr__ from fncache._records (generated, it cost every import ~0.1 ms).
@dataclass(eq=False, repr=False)
class Fingerprint(Shown):
    """A function's or class's fingerprint: its digest and its ``components`` (a readable label,
    ``"global THRESHOLD"``, to a hex digest); :meth:`valid`: whether all it was made of is the same."""

    digest: bytes
    components: dict[str, str]
    _dict_watches: tuple[tuple[Any, str, Any], ...] = ()
    _attr_watches: tuple[tuple[Any, str, Any], ...] = ()
    _len_watches: tuple[tuple[Any, int], ...] = ()
    _mutable: tuple[tuple[Any, bytes], ...] = ()
    _mutable_where: tuple[str, ...] = ()  # where each mutable value was read ("global CALLS")
    cacheable: bool = True
    generation: int = 0
    root: str | None = None  # the module classes are named relative to (see _hasher.digest)
    # ids of mutable values reached only through a closure or default of a function it covers,
    # and of random generators drawn from through their module (see classes.random_methods).
    _private: frozenset[int] = frozenset()
    #: Infrastructure that cannot be pickled, keyed by type and name (``"global LOCK
    #: (_thread.lock)"``); :attr:`by_name` lists it with the state the function writes.
    infrastructure: tuple[str, ...] = ()
    _unpicklable: tuple[Any, ...] = ()
    #: For ``explain``: the user functions it covers by label (their sources are kept with entries),
    #: each global value read as a person reads it (``"0.5"``; ``"pandas.DataFrame (160.0 MB) ..."``).
    functions: tuple[tuple[str, Any], ...] = ()
    shown: tuple[tuple[str, str], ...] = ()
    #: Mutable values slow to re-hash on every use (timed by the first): ``(where, what, seconds)``.
    slow: tuple[tuple[str, str, float], ...] = ()
    #: ``(where, value)`` slow to hash in the walk (till :meth:`_first_rehash`); the report's name.
    _unmeasured: tuple[tuple[str, Any], ...] = ()
    _reported_as: str = ""
    #: The components keyed by name, with why (see :attr:`by_name`).
    named: tuple[tuple[str, str], ...] = ()

    @property
    def by_name(self) -> dict[str, str]:
        """Components keyed by name rather than content, with why: ``{"global n": "rebound by the
        function"}`` (its code rebinds it) or ``"modified by the function"`` (seen changing while it
        ran). Changes to these values do not change the key."""
        found = dict(self.named)
        found.update(dict.fromkeys(self.infrastructure, "cannot be pickled: keyed by type and name"))
        return found

    def changed_state(self) -> list[Any]:
        """The mutable values read whose content differs from when this fingerprint was made."""
        if self._unmeasured:
            return self._first_rehash()
        out = []
        for value, d in self._mutable:
            try:
                if _hasher.digest(value, self.root) != d:
                    out.append(value)
            except Exception:
                out.append(value)
        return out

    def changed_names(self, changed: Iterable[Any] = ()) -> list[str]:
        """Where the code reads what differs now: ``["global CALLS"]``, for the rebound names and
        for the ``changed`` values (as :meth:`changes` gives them), each once."""
        out: dict[str, None] = {}
        for m, n, o in self._dict_watches:
            if m.get(n, MISSING) is not o:
                out[f"global {n}" if isinstance(m, dict) and "__name__" in m else repr(n)] = None
        for w, a, o in self._attr_watches:
            if getattr(w, a, MISSING) is not o:
                out[f"{getattr(w, '__qualname__', type(w).__qualname__)}.{a}"] = None
        ids = {id(v) for v in changed}
        for (value, _), where in zip(self._mutable, self._mutable_where, strict=False):
            if id(value) in ids:
                out[where] = None
        return list(out)

    def changes(self) -> tuple[bool, list[Any], bool]:
        """What differs from when this fingerprint was made: (a name it read was rebound, the
        mutable values whose content changed, all of those are reached only privately).

        "Privately" means through a closure variable or a default of a function it covers, never a
        global, module attribute or class attribute: another thread can modify such a value only by
        calling those functions (or by holding it already). Identity checks and re-hashes only.
        """
        changed = self.changed_state() if self._mutable else []
        private = not changed or all(id(v) in self._private for v in changed)
        return not self._same_objects(), changed, private

    def _mutable_unchanged(self) -> bool:
        """Whether every mutable value read hashes as it did (stops at the first that does not, but
        on the first re-hash, which times them all)."""
        if self._unmeasured:
            return not self._first_rehash()
        for value, d in self._mutable:
            try:
                if _hasher.digest(value, self.root) != d:
                    return False
            except Exception:
                return False
        return True

    def _first_rehash(self) -> list[Any]:
        """:meth:`changed_state` for the first re-hash after the walk: it times the values the walk
        found slow (the walk's time may include one-time costs: an import, cold caches) and reports
        those still slow (:func:`_report_slow`), once per fingerprint, with no extra hash."""
        pending: dict[int, list[str]] = {}
        for where, value in self._unmeasured:  # one value may be read under several names
            pending.setdefault(id(value), []).append(where)
        self._unmeasured = ()
        out: list[Any] = []
        slow: list[tuple[str, str, float]] = []
        for value, d in self._mutable:
            start = time.perf_counter()
            try:
                same = _hasher.digest(value, self.root) == d
            except Exception:
                out.append(value)
                continue
            spent = time.perf_counter() - start
            if not same:
                out.append(value)
            if spent > SLOW_REHASH:
                slow.extend((where, describe(value), spent) for where in pending.pop(id(value), ()))
        self.slow = tuple(slow)
        if slow and self._reported_as:
            _report_slow(self._reported_as, self.slow)
        return out

    def _same_objects(self) -> bool:
        """Whether every name and attribute read is bound to the object it was, and every mapping
        counted has its length (loops, not generators: every hit and every miss asks)."""
        for mapping, name, obj in self._dict_watches:
            if mapping.get(name, MISSING) is not obj:
                return False
        for owner, attr, obj in self._attr_watches:
            try:
                now = getattr(owner, attr, MISSING)
            except ValueError:  # an empty closure cell
                now = MISSING
            if now is not obj:
                return False
        for mapping, n in self._len_watches:
            if len(mapping) != n:
                return False
        return True

    def valid(self) -> bool:
        """Cheap check that no global, code, default, closure or class it read has changed."""
        if self.generation != _usercode._generation[0]:
            return False  # track()/untrack() changed what counts as user code since
        if not self._same_objects():
            return False
        if self._mutable and not self._mutable_unchanged():
            return False
        for obj in self._unpicklable:
            # Keyed by name because nothing else could key it: a ref() or register() since then
            # gives it a token, which must count from the next call on.
            if _registry.has_ref(obj) or not _registry.is_resolved(type(obj)):
                return False
        return True


_fp_cache: weakref.WeakKeyDictionary[Any, Fingerprint] = weakref.WeakKeyDictionary()
_fp_cache_versions: weakref.WeakKeyDictionary[Any, Fingerprint] = weakref.WeakKeyDictionary()
_fp_lock = threading.Lock()
_in_progress = threading.local()


def _fresh_fp_lock() -> None:
    global _fp_lock
    _fp_lock = threading.Lock()


_forks.on_fork(_fresh_fp_lock)


# Objects a memoized function was seen to modify while it ran (a log list, a counter, a memo dict):
# state it writes, not an input, *for that function only*; another function reading them keys them
# by content. id(function) -> (function, {id: object}); both kept alive: no id is reused meanwhile.
_state: dict[int, tuple[Any, dict[int, Any]]] = {}


def mark_state(fn: Any, objs: Iterable[Any], before: Fingerprint) -> None:
    """Key these objects by the name they are read under and the content they had before ``fn``
    first modified them (in ``before``, the fingerprint its key was made with), not by their
    content now, in ``fn``'s fingerprint.

    Called by memoize when a run of ``fn`` changed a mutable global, closure value or default and the
    change is attributed to ``fn`` itself: otherwise every call would see a new value and miss
    (``log.append(x)`` in a cached function). The first content stays in the key: the program
    starts from it, and an edit of it in the source (``WEIGHTS = [3, 1, 5]``) is another program.
    """
    from fncache.code.classes import safe_token

    fn = unwrap_memoized(fn)
    first = {id(v): d for v, d in before._mutable}  # what the key was made from
    with _fp_lock:
        owned = _state.setdefault(id(fn), (fn, {}))[1]
        for obj in objs:
            if id(obj) not in owned:
                d = first.get(id(obj))
                owned[id(obj)] = (obj, ("value", d) if d is not None else safe_token(obj))
        for cache in (_fp_cache, _fp_cache_versions):
            try:
                cache.pop(fn, None)
            except TypeError:  # not weakly referenceable: never cached
                pass



def _result(walk: Walk) -> Fingerprint:
    """The fingerprint a finished walk describes."""
    if walk.versions and walk.distributions:
        # One component per distribution, so a miss can say which one moved.
        for dist, version in distribution_versions(walk.distributions):
            walk.components[f"version {dist}"] = _hasher.digest(version).hex()
    comps = dict(sorted(walk.components.items()))
    # The root, where reached again: ``a`` and ``b`` calling each other have one set of components.
    root = (("root", walk.labels.get(walk.root_id)),) * walk.root_again
    private: frozenset[int] = frozenset()
    if walk.private:
        # A value also reached through a global or an attribute is not private.
        reads: dict[int, int] = {}
        for v, _ in walk.mutable:
            reads[id(v)] = reads.get(id(v), 0) + 1
        private = frozenset(i for i in walk.private if reads[i] == walk.private.count(i))
    return Fingerprint(
        _unmeasured=tuple(walk.slow),
        digest=_hasher.digest(("fncache.fingerprint", tuple(comps.items())) + root),
        components=comps,
        _dict_watches=tuple(walk.dict_watches),
        _attr_watches=tuple(walk.attr_watches),
        _len_watches=tuple(walk.len_watches),
        _mutable=tuple(walk.mutable),
        _mutable_where=tuple(walk.mutable_where),
        cacheable=walk.cacheable,
        generation=_usercode._generation[0],
        root=walk.root_module,
        _private=private,
        infrastructure=tuple(sorted(walk.by_name)),
        named=tuple(sorted((label, why) for label, (why, d) in walk.named.items()
                           if comps.get(label) == d)),
        _unpicklable=tuple(walk.unpicklable_values),
        functions=tuple(sorted(walk.functions.items())),
        shown=tuple(sorted(walk.shown.items())),
    )


# (function, where) pairs already reported as slow: once per process each.
_reported_slow: set[tuple[str, str]] = set()


def _reported_name(obj: Any) -> str:
    """``obj``'s name in a slow-value report, as ls and explain name it."""
    from fncache.code.targets import recorded_module

    module = recorded_module(getattr(obj, "__module__", None) or "?", getattr(obj, "__globals__", None))
    return f"{module}:{getattr(obj, '__qualname__', '?')}"


def _report_slow(name: str, slow: Iterable[tuple[str, str, float]]) -> None:
    """Log at INFO, once per function and value, each value that every use of its fingerprint
    re-hashes slowly (``(where, what, seconds)``, see :attr:`Fingerprint.slow`)."""
    for where, what, seconds in slow:
        if (name, where) in _reported_slow:
            continue
        _reported_slow.add((name, where))
        log.info(
            "%s reads %s, a %s, and re-hashes it on every call to see whether it changed: %.1f ms a "
            "call. If it does not change, pass it as an argument, key it with fncache.ref(value, "
            "token), or pin the function's code with version= (docs: \"Performance\", \"Large globals\")",
            name, where, what, seconds * 1000)


def _library_fingerprint(obj: Any, versions: bool) -> Fingerprint:
    module = getattr(obj, "__module__", None)
    token: tuple[Any, ...] = ("ref", module, getattr(obj, "__qualname__", None))
    components = {}
    if versions and module:
        found = distribution_versions([module.split(".")[0]])
        if found:
            token += (found,)
            components = {f"version {d}": v for d, v in found}
    return Fingerprint(digest=_hasher.digest(token), components=components,
                       generation=_usercode._generation[0])


def fingerprint(obj: Callable[..., Any] | type, *, versions: bool = False,
                owner: type | None = None, ignore_globals: frozenset[str] = frozenset(),
                ) -> Fingerprint:
    """The fingerprint of a function or class (user code by value, library code by reference).

    Cached per object and revalidated on each use (see the module docstring). ``versions=True`` adds
    the versions of the installed distributions whose code the function reaches. ``owner``: the
    class a method is defined in, covered as code the method reads (a memoized method whose
    ``self`` is ignored, so nothing else brings the class in); such a fingerprint is not cached
    here, its caller keeps it. ``ignore_globals``: names of globals left out of the fingerprint
    (keyed by name, never watched), wherever the walk reads them; likewise not cached here.
    """
    if owner is not None or ignore_globals:
        return _compute(unwrap_memoized(obj), versions, owner, ignore_globals)
    fp = _fingerprint_of(unwrap_memoized(obj), versions)
    sink = getattr(_in_progress, "by_name", None)
    if sink is not None and fp.infrastructure:
        # Reached while another fingerprint is computed (a function held in a value it reads):
        # what this one keys by name is keyed by name there too.
        held_by = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        sink.update(dict.fromkeys(f"{held_by}: {item}" for item in fp.infrastructure))
    return fp


def _fingerprint_of(obj: Any, versions: bool) -> Fingerprint:
    cache = _fp_cache_versions if versions else _fp_cache
    try:
        hit = cache.get(obj)
    except TypeError:  # unhashable or not weakly referenceable: compute every time
        hit = None
    if hit is not None:
        validating: set[int] = _validating()
        if id(obj) in validating:
            # Asked again while checking this very fingerprint (a mutable value it read refers back
            # to it): the answer under check is the one to use, or the check would never end.
            return hit
        validating.add(id(obj))
        try:
            ok = hit.valid()
        finally:
            validating.discard(id(obj))
        if ok:
            return hit
    if isinstance(obj, (types.FunctionType, type)) and not is_user_code(obj) and not (
            isinstance(obj, types.FunctionType) and holds_user_code(obj)):
        fp = _library_fingerprint(obj, versions)
    else:
        fp = _compute(obj, versions)
        if fp._unmeasured:  # reported once the next use re-hashes them (see _first_rehash)
            fp._reported_as = _reported_name(obj)
        if not fp.cacheable:
            return fp
    try:
        with _fp_lock:
            cache[obj] = fp
    except TypeError:
        pass
    return fp


def still_valid(fp: Fingerprint) -> bool:
    """:meth:`Fingerprint.valid`, re-entrant: asked again while this very fingerprint is being
    checked (a value it read holds the memoized function itself, e.g. ``self.f = memoize(self.f)``),
    the fingerprint under check is the answer, or the check would never end."""
    if not fp._mutable:
        return fp.valid()  # identity checks only: nothing in it can call back here (the hit path)
    validating = _validating()
    if id(fp) in validating:
        return True
    validating.add(id(fp))
    try:
        return fp.valid()
    finally:
        validating.discard(id(fp))


def _validating() -> set[int]:
    try:
        return _in_progress.validating  # type: ignore[no-any-return]
    except AttributeError:
        _in_progress.validating = set()
        return _in_progress.validating  # type: ignore[no-any-return]


def _visit_root(walk: Walk, obj: Any, owner: type | None) -> None:
    """Walk what ``obj``, the fingerprint's root, is made of."""
    if isinstance(obj, type):
        walk.visit_class(obj)
    elif type(obj) is types.FunctionType and is_user_code(obj):  # (not a proxy: see proxy_parts)
        walk.visit_function(obj)
        if owner is not None:
            # What ``self.helper(x)`` runs: the class's methods and attributes, and its bases.
            walk.components["class of self"] = _hasher.digest(walk.reference(owner)).hex()
    elif isinstance(obj, types.ModuleType):
        # A user module reached as a value (see _module_token): every name it defines.
        walk.visit_module_attrs(obj, whole_module(obj), whole=True)
    elif callable(obj):
        # A callable object (functools.partial, an lru_cache wrapper, an instance with
        # __call__) or a library function holding user code (a decorator's ``__wrapped__``):
        # by content, following the user code it holds.
        label = f"callable {getattr(obj, '__qualname__', type(obj).__qualname__)}"
        walk.components[label] = _hasher.digest(walk.reference(obj)).hex()
    else:
        raise ArgumentTypeError(f"fingerprint: expected a function or class, got {type(obj).__name__}")


def _compute(obj: Any, versions: bool, owner: type | None = None,
             ignore_globals: frozenset[str] = frozenset()) -> Fingerprint:
    # A walk imports what body imports name; one defining a name the walk found missing (``pkg.b``
    # read before ``pkg.ensure()`` imports it) makes it again, while walks import more modules.
    for _ in range(16):
        loaded = len(sys.modules)
        fp = _walked(obj, versions, owner, ignore_globals)
        if fp._same_objects() or len(sys.modules) == loaded:
            break
    return fp


def _walked(obj: Any, versions: bool, owner: type | None,
            ignore_globals: frozenset[str]) -> Fingerprint:
    # The walk is imported at the first fingerprint of user code: a process that keys library
    # functions only (a scikit-learn pipeline's) never loads it.
    from fncache.code.walk import Walk

    stack: list[Any] = getattr(_in_progress, "stack", None) or []
    _in_progress.stack = stack
    for depth, o in enumerate(stack):
        if o is obj:
            # Reached again while its own fingerprint is being computed (a class whose instances
            # are among its attributes, a function that reads a dict holding itself): a reference
            # by name ends the cycle. A result containing such a token is deterministic only if the
            # token points back at its own root; otherwise it depends on where the walk started and
            # is not cached.
            _in_progress.cycles.add(depth)
            return Fingerprint(digest=_hasher.digest(("cycle", getattr(obj, "__module__", None),
                                                      getattr(obj, "__qualname__", None))),
                               components={}, cacheable=False,
                               generation=_usercode._generation[0])
    depth = len(stack)
    stack.append(obj)
    outer = getattr(_in_progress, "cycles", None)
    _in_progress.cycles = set()
    # Values hashed during the walk name classes the way its labels do (relative to its root).
    outer_root = _hasher.relative_to(getattr(obj, "__module__", None) or "")
    outer_sink = getattr(_in_progress, "by_name", None)
    try:
        found = _state.get(id(obj))
        walk = Walk(obj, versions, found[1] if found is not None and found[0] is obj else None,
                    ignore_globals)
        _in_progress.by_name = walk.by_name
        _visit_root(walk, obj, owner)
        fp = _result(walk)
    finally:
        _hasher.relative_to(outer_root)
        _in_progress.by_name = outer_sink
        stack.pop()
        cycles = _in_progress.cycles
        cycles.discard(depth)
        _in_progress.cycles = (outer or set()) | cycles
    fp.cacheable = not cycles
    return fp
