"""Properties of keys and stored values, over generated data (hypothesis).

"Equal" here is *structural* equality including types: ``1``, ``1.0`` and ``True`` are equal in
Python but are different arguments to a cache (a function can tell them apart), and so are ``0.0``
and ``-0.0``, a list and a tuple, a set and a frozenset, ``"a"`` and ``b"a"``. Dicts are compared in
insertion order, since a function can observe it (``list(d)``); sets are not ordered, so their
iteration order never matters. Floats compare by their bits, which makes every NaN equal to a NaN
with the same bits (``f(nan)`` hits an earlier ``f(nan)``, although ``nan != nan``).
"""

from __future__ import annotations

import copy
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fncache
from fncache import _codec
from fncache.values.hasher import digest

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.binary(max_size=12)
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(hashables, inner, max_size=5)
        | st.sets(hashables, max_size=5)
        | st.frozensets(hashables, max_size=5)
    ),
    max_leaves=25,
)


def same(a: Any, b: Any) -> bool:
    """Structural equality including types (see the module docstring)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        pairs = zip(a.items(), b.items(), strict=True) if len(a) == len(b) else None
        return pairs is not None and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in pairs
        )
    if type(a) in (set, frozenset):
        return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)
    return bool(a == b)


def rebuild(v: Any) -> Any:
    """An equal value of fresh objects: no identity, interning or set order shared with ``v``."""
    t = type(v)
    if t is str:
        return "".join([c for c in v])[::-1][::-1] if v else ""
    if t is bytes:
        return bytes(bytearray(v))
    if t is int:
        return int(str(v))
    if t is float:
        return struct.unpack("<d", struct.pack("<d", v))[0]
    if t is list:
        return [rebuild(x) for x in v]
    if t is tuple:
        return tuple(rebuild(x) for x in v)
    if t is dict:
        return {rebuild(k): rebuild(x) for k, x in v.items()}
    if t in (set, frozenset):
        # Insert in the opposite order, so iteration order may differ from the original's.
        return t(rebuild(x) for x in reversed(list(v)))
    return v


def _variants(leaf: Any) -> list[Any]:
    """Values equal or close to ``leaf`` in Python that must still give a different key."""
    t = type(leaf)
    out: list[Any] = []
    if t is bool:
        out += [int(leaf), float(leaf)]
    elif t is int:
        out += [leaf + 1]
        if abs(leaf) < 2**53:
            out.append(float(leaf))
        if leaf in (0, 1):
            out.append(bool(leaf))
    elif t is float:
        out += [-leaf]  # includes 0.0 <-> -0.0
        if leaf.is_integer() and abs(leaf) < 2**63:
            out.append(int(leaf))
    elif t is str:
        out += [leaf.encode("utf-8", "surrogatepass"), leaf + "\0"]
    elif t is bytes:
        out += [leaf.decode("latin-1"), leaf + b"\0"]
    elif leaf is None:
        out += [(), 0, False, ""]
    return [x for x in out if not same(x, leaf)]


def _mutations(v: Any) -> list[Any]:
    """Values made from ``v`` by one small change: each differs from ``v`` structurally."""
    t = type(v)
    out = list(_variants(v))
    if t is list:
        out.append(tuple(v))
        for i, x in enumerate(v):
            out += [v[:i] + [m] + v[i + 1:] for m in _mutations(x)]
    elif t is tuple:
        out.append(list(v))
        for i, x in enumerate(v):
            out += [v[:i] + (m,) + v[i + 1:] for m in _mutations(x) if _hashable_like(x, m)]
    elif t is dict:
        items = list(v.items())
        if len(items) >= 2:
            out.append(dict(reversed(items)))  # same pairs, another order
        for i, (k, x) in enumerate(items):
            out += [dict(items[:i] + [(k, m)] + items[i + 1:]) for m in _mutations(x)]
    elif t in (set, frozenset):
        out.append(frozenset(v) if t is set else set(v))
        for x in v:
            rest = [y for y in v if y is not x]
            for m in _variants(x):
                if not any(m == y for y in rest):
                    out.append(t([*rest, m]))
    return out


def _hashable_like(old: Any, new: Any) -> bool:
    try:
        hash(old)
    except TypeError:
        return True
    try:
        hash(new)
    except TypeError:
        return False
    return True


@SETTINGS
@given(values)
def test_deep_copies_give_equal_keys(v):
    """A value and its deep copy give the same key."""
    assert digest(v) == digest(copy.deepcopy(v))


@SETTINGS
@given(values)
def test_values_rebuilt_from_fresh_objects_give_equal_keys(v):
    """A value rebuilt from fresh objects (new strings, other set insertion order) keys the same."""
    w = rebuild(v)
    assert same(v, w)
    assert digest(v) == digest(w)


@SETTINGS
@given(values, values)
def test_sharing_of_sub_values_does_not_change_the_key(x, y):
    """A value holding one object twice keys the same as one holding two equal copies."""
    shared = [x, y, x, (x, y), {"a": x, "b": x}]
    fresh = [copy.deepcopy(x), y, rebuild(x), (rebuild(x), rebuild(y)),
             {"a": copy.deepcopy(x), "b": rebuild(x)}]
    assert digest(shared) == digest(fresh)


@SETTINGS
@given(values, values)
def test_keys_are_equal_exactly_when_values_are_structurally_equal(a, b):
    """Two generated values give one key if and only if they are structurally equal."""
    assert (digest(a) == digest(b)) == same(a, b)


@SETTINGS
@given(values, st.data())
def test_one_small_change_always_changes_the_key(v, data):
    """1 vs 1.0 vs True, 0.0 vs -0.0, list vs tuple, set vs frozenset, str vs bytes: new keys."""
    options = _mutations(v)
    assume(options)
    w = data.draw(st.sampled_from(options))
    assert not same(v, w)
    assert digest(v) != digest(w)


@pytest.mark.parametrize("a, b", [
    (1, 1.0), (1, True), (1.0, True), (0, False), (0.0, -0.0), ([], ()), (set(), frozenset()),
    ("a", b"a"), ({1: "x"}, {True: "x"}), ({1, 2}, {1.0, 2}), ({0.0}, {-0.0}),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}), (None, ()), ((1,), [1]),
])
def test_python_equal_but_structurally_different_values_have_different_keys(a, b):
    """Values that compare equal in Python but differ in type, sign or order have distinct keys."""
    assert digest(a) != digest(b)


def test_nan_is_keyed_by_its_bits():
    """Every NaN with the same bits gives one key (a cache hit), although nan != nan."""
    nan = float("nan")
    other = struct.unpack("<d", struct.pack("<d", nan))[0]
    assert nan is not other and nan != other
    assert digest(nan) == digest(other) == digest(math.nan)
    assert digest([nan, {nan}]) == digest(copy.deepcopy([nan, {nan}]))
    assert digest(nan) != digest(-nan)  # another sign bit, another key
    assert digest(nan) != digest(math.inf)


@SETTINGS
@given(values, st.sampled_from([None, "zstd", "lz4"]), st.sampled_from([None, b"s3cret"]))
def test_codec_round_trip_returns_a_structurally_equal_value(v, compress, secret):
    """Encoding then decoding under the same key gives back a structurally equal value."""
    key = digest(("k", repr(type(v)))).hex()
    frame = _codec.encode(v, key, created=1.0, duration=2.0, secret=secret, compress=compress)
    out, header = _codec.decode(frame, key, secret=secret)
    assert same(out, v)
    assert (header.created, header.duration, header.signed) == (1.0, 2.0, secret is not None)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=4),
       st.integers(min_value=64 * 1024, max_value=300_000),
       st.sampled_from(["uint8", "float64", "int32"]))
def test_codec_round_trip_of_out_of_band_buffers(chunks, size, dtype):
    """Large arrays travel beside the pickle, 64-byte aligned, and come back equal and writable."""
    np = pytest.importorskip("numpy")
    value = [np.frombuffer((c * (size // len(c) + 8))[: size - size % 8], dtype=dtype).copy()
             for c in chunks]
    key = "ab" * 16
    frame = _codec.encode(value, key, created=0.0, duration=0.0)
    header = _codec.read_header(frame)
    assert len(header.buffer_lens) == len(value) and header.body_offset % 64 == 0
    for source in (frame, bytearray(frame)):
        out, _ = _codec.decode(source, key)
        assert len(out) == len(value)
        for a, b in zip(out, value, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        out[0][0] = 1  # writable


def _identity(v: Any) -> Any:
    return v


@settings(max_examples=40, deadline=None)
@given(values)
def test_memoized_hit_returns_a_structurally_equal_value(v):
    """A memoized call's second result (a hit) equals the first, types and all."""
    f = fncache.memoize(store="memory://properties")(_identity)
    first = f(v)
    before = f.cache_info().hits
    second = f(rebuild(v))
    assert f.cache_info().hits == before + 1
    assert same(first, v) and same(second, v)
