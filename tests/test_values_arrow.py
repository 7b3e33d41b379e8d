"""Arrow keys over many blocks: what lies under null slots never counts, every value does;
dictionary-encoded columns key by their decoded values, whatever their dictionaries.

The hasher reads columns a block of rows at a time. The blocks are made small here, so that short
columns span several and a null (or a null slot with a range of its own) can sit in the first
block, a middle one or the last, after clean blocks or before them, in slices at any bit offset
and in chunks that do not begin at offset 0; and keys are checked not to depend on the block size.

Every test runs twice: with the native kernel that zeroes null slots (``fncache._speedups``) and
with its numpy twin, which a package installed without a C compiler uses.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fncache
from fncache.values import arrow as _values_arrow
from fncache.values import arrow_streams as _arrow_streams

from .helpers import fail_on_pickle_fallback, require_native

pa = pytest.importorskip("pyarrow")

H = fncache.hash
DEFAULT_BLOCK = _arrow_streams._BLOCK
BLOCK = 64
N = 3 * BLOCK + 21  # three full blocks and a partial one
canonical_paths_only = pytest.fixture(autouse=True)(fail_on_pickle_fallback)


@pytest.fixture(autouse=True, params=["native", "numpy"])
def small_blocks(request, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_arrow_streams, "_BLOCK", BLOCK)
    monkeypatch.setattr(_arrow_streams, "_MASK_BYTES", BLOCK * 4)  # 4 to 256 rows, by width
    if request.param == "numpy":
        monkeypatch.setattr(_arrow_streams, "speedups", None)
    elif _arrow_streams.speedups is None:
        require_native()


def _bitmap(valid: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _fixed_with(arr: pa.Array, fill: bytes) -> pa.Array:
    """``arr`` (unsliced) rebuilt with ``fill`` repeated in the bytes of every null slot."""
    width = arr.type.bit_width // 8
    data = np.frombuffer(arr.buffers()[1], np.uint8, count=len(arr) * width).copy()
    rows = data.reshape(len(arr), width)
    null = ~np.asarray(arr.is_valid())
    rows[null] = np.frombuffer((fill * width)[:width], np.uint8)
    return pa.Array.from_buffers(arr.type, len(arr), [_bitmap(~null), pa.py_buffer(data)])


def _null_positions(rng: np.random.Generator, where: str) -> np.ndarray:
    null = np.zeros(N, bool)
    spots = {"first block": slice(0, 50), "middle block": slice(N // 2, N // 2 + 50),
             "last block": slice(N - 10, N)}  # the middle spot spans two blocks
    if where == "random":
        null = rng.random(N) < 0.1
    else:
        null[spots[where]] = rng.random(50 if where != "last block" else 10) < 0.5
        null[spots[where].start] = True
    return null


FIXED = [pa.int64(), pa.float64(), pa.int8(), pa.uint16(), pa.int32(), pa.timestamp("ns"),
         pa.decimal128(20, 3), pa.binary(3)]


def _fixed_values(typ: pa.DataType, rng: np.random.Generator, null: np.ndarray) -> pa.Array:
    if pa.types.is_decimal(typ):
        from decimal import Decimal

        return pa.array([None if z else Decimal(int(v)) / 1000
                         for z, v in zip(null, rng.integers(-10**9, 10**9, N), strict=True)], typ)
    if pa.types.is_fixed_size_binary(typ):
        raw = rng.integers(0, 256, (N, 3), dtype=np.uint8)
        return pa.array([None if z else bytes(r) for z, r in zip(null, raw, strict=True)], typ)
    if pa.types.is_floating(typ):
        return pa.array(rng.standard_normal(N), typ, mask=null)
    return pa.array(rng.integers(0, 100, N).astype(typ.to_pandas_dtype()), typ, mask=null)


@pytest.mark.parametrize("where", ["random", "first block", "middle block", "last block"])
@pytest.mark.parametrize("typ", FIXED, ids=str)
def test_fixed_width_bytes_under_nulls_never_count(typ, where):
    """Zeros, 0xFF or other garbage under null slots give one key, sliced at any bit offset."""
    rng = np.random.default_rng(7)
    null = _null_positions(rng, where)
    arr = _fixed_values(typ, rng, null)
    zeros, ones, other = (_fixed_with(arr, b) for b in (b"\0", b"\xff", b"\x5a\x13"))
    key = H(arr)
    assert H(zeros) == H(ones) == H(other) == key
    for start in (1, 3, 8, 13):
        fresh = pa.array(arr.slice(start).to_pylist(), typ)  # zeros under nulls, offset 0
        assert H(ones.slice(start)) == H(arr.slice(start)) == H(fresh)
    cut = N // 3 + 5
    assert H(pa.chunked_array([ones.slice(0, cut), other.slice(cut)])) \
        == H(pa.chunked_array([zeros])) == H(pa.chunked_array([arr]))


@pytest.mark.parametrize("typ", FIXED, ids=str)
def test_fixed_width_every_value_counts(typ):
    """A changed value in any block, or a valid slot turned null, is a new key."""
    rng = np.random.default_rng(3)
    null = _null_positions(rng, "random")
    values = _fixed_values(typ, rng, null).to_pylist()
    key = H(pa.array(values, typ))
    valid = [i for i, v in enumerate(values) if v is not None]
    for i in (valid[0], valid[len(valid) // 2], valid[-1]):
        other = [v for v in values if v is not None and v != values[i]][0]
        changed = values[:i] + [other] + values[i + 1:]
        assert H(pa.array(changed, typ)) != key, i
        assert H(pa.array(values[:i] + [None] + values[i + 1:], typ)) != key, i


def _with_ranges_under_nulls(values: list, typ: pa.DataType) -> pa.Array:
    """A string or binary array whose null slots own bytes of their own (Arrow allows it)."""
    large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    parts = [b"junk" if v is None else (v.encode() if isinstance(v, str) else v) for v in values]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
    valid = np.array([v is not None for v in values])
    return pa.Array.from_buffers(typ, len(values), [
        _bitmap(valid), pa.py_buffer(offsets.astype(np.int64 if large else np.int32)),
        pa.py_buffer(b"".join(parts))])


def _texts(where: str) -> list:
    rng = np.random.default_rng(5)
    words = np.array(["", "a", "bb", "ccc", "dddd"])[rng.integers(0, 5, N)].tolist()
    null = _null_positions(rng, where)
    return [None if z else w for z, w in zip(null, words, strict=True)]


@pytest.mark.parametrize("where", ["random", "first block", "middle block", "last block"])
@pytest.mark.parametrize("typ", [pa.string(), pa.large_binary()], ids=str)
def test_strings_ranges_under_nulls_never_count(typ, where):
    """Null slots with bytes of their own, in any block, key like empty ones: whole, sliced, chunked."""
    texts = _texts(where)
    values = texts if pa.types.is_string(typ) else [t if t is None else t.encode() for t in texts]
    fresh = pa.array(values, typ)
    ranged = _with_ranges_under_nulls(values, typ)
    assert ranged.null_count == fresh.null_count and ranged.to_pylist() == values
    key = H(fresh)
    assert H(ranged) == key
    for start in (1, 5, 8, N // 2 + 3):
        assert H(ranged.slice(start)) == H(fresh.slice(start)) == H(pa.array(values[start:], typ))
    cut = N // 2 + 7
    one = H(pa.chunked_array([fresh]))
    assert H(pa.chunked_array([ranged.slice(0, cut), ranged.slice(cut)])) == one
    assert H(pa.chunked_array([fresh.slice(0, cut), ranged.slice(cut)])) == one
    assert H(pa.chunked_array([ranged.slice(0, cut), pa.array(values[cut:], typ)])) == one


def test_strings_every_length_and_byte_counts():
    """Moving a byte between neighbours, or changing one, in any block is a new key."""
    texts = _texts("random")
    key = H(pa.array(texts))
    for i in (1, N // 2, N - 3):
        j = next(k for k in range(i, N - 1) if texts[k] and texts[k + 1] is not None)
        moved = texts[:j] + [texts[j][:-1], texts[j][-1] + texts[j + 1]] + texts[j + 2:]
        assert "".join(t or "" for t in moved) == "".join(t or "" for t in texts)
        assert H(pa.array(moved)) != key
        assert H(_with_ranges_under_nulls(moved, pa.string())) != key
        changed = texts[:j] + [texts[j][:-1] + "z"] + texts[j + 1:]
        assert H(pa.array(changed)) != key


def test_lists_ranges_under_nulls_never_count():
    """A null list slot that spans child values keys like an empty one, in any block and sliced."""
    rng = np.random.default_rng(9)
    lengths = rng.integers(0, 4, N)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    child = pa.array(rng.integers(0, 9, int(offsets[-1])))
    null = _null_positions(rng, "random") & (lengths > 0)
    ranged = pa.Array.from_buffers(pa.list_(pa.int64()), N, [_bitmap(~null),
                                   pa.py_buffer(offsets)], children=[child])
    values = ranged.to_pylist()
    fresh = pa.array(values, pa.list_(pa.int64()))
    assert H(ranged) == H(fresh)
    assert H(ranged.slice(3)) == H(pa.array(values[3:], pa.list_(pa.int64())))
    i = next(k for k in range(N // 2, N) if values[k])
    assert H(pa.array(values[:i] + [values[i][:-1]] + values[i + 1:], pa.list_(pa.int64()))) \
        != H(fresh)



def test_keys_do_not_depend_on_the_block_size(monkeypatch):
    """Columns longer than the default block, with bytes under nulls, key alike for any block size."""
    rng = np.random.default_rng(11)
    n = 2 * DEFAULT_BLOCK + 1000
    null = rng.random(n) < 0.1
    ints, floats = rng.integers(-9, 9, n), rng.standard_normal(n)
    words = np.array(["", "a", "bb", "ccc"])[rng.integers(0, 4, n)]
    junk = np.where(null, "junk", words)
    offsets = np.concatenate([[0], np.cumsum(np.char.str_len(junk))]).astype(np.int32)
    ranged = pa.Array.from_buffers(pa.string(), n, [_bitmap(~null), pa.py_buffer(offsets),
                                                    pa.py_buffer("".join(junk).encode())])
    garbage = pa.table({"i": pa.array(ints, mask=null), "f": pa.array(floats, mask=null),
                        "s": ranged})  # numpy's values stay under the nulls
    clean = pa.table({"i": pa.array(np.where(null, 0, ints), mask=null),
                      "f": pa.array(np.where(null, 0.0, floats), mask=null),
                      "s": pa.array(words, mask=null)})
    keys: dict[int, set[str]] = {0: set(), 1: set(), 5: set()}
    for block in (DEFAULT_BLOCK, 4096, 1000, 64):
        monkeypatch.setattr(_arrow_streams, "_BLOCK", block)
        for start, found in keys.items():
            found.update({H(garbage.slice(start)), H(clean.slice(start))})
    assert all(len(found) == 1 for found in keys.values()), keys


# -- dictionary-encoded columns ----------------------------------------------------------------

WORDS = ["", "a", "b", "ab", "ba", "a\0", "\u00e9t\u00e9", "zzz"]


def _encode(values: list, rng: np.random.Generator, *, index: pa.DataType = pa.int32(),
            value_type: pa.DataType = pa.string(), unused: int = 0, copies: int = 1,
            null_entry: bool = False, junk: int = 0) -> pa.Array:
    """A DictionaryArray that decodes to ``values``: the dictionary in random order, with
    ``unused`` entries nobody refers to, each value ``copies`` times (slots pick a copy at
    random), a null entry that no slot refers to (when ``null_entry``: null slots are null
    indices), and ``junk`` slots of other values on each side, sliced off."""
    distinct = sorted({v for v in values if v is not None})
    extra = [w + "#unused" for w in WORDS[:unused]]
    entries = [v for v in distinct for _ in range(copies)] + extra + ([None] if null_entry else [])
    if junk:
        entries.append("junk")
    order = rng.permutation(len(entries))
    dictionary = [entries[i] for i in order]
    where: dict = {}
    for pos, v in enumerate(dictionary):
        where.setdefault(v, []).append(pos)
    pad = [where["junk"][0]] * junk if junk else []
    indices = pad + [rng.choice(where[v]) if v is not None else None for v in values] + pad
    arr = pa.DictionaryArray.from_arrays(pa.array(indices, index), pa.array(dictionary, value_type))
    return arr.slice(junk, len(values)) if junk else arr


def _dict_layouts(values: list, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    cut = len(values) // 3
    typ = pa.dictionary(pa.int32(), pa.string())
    shared = pa.array(values, pa.string()).dictionary_encode()
    return {
        "dictionary_encode": pa.chunked_array([shared]),
        "permuted": pa.chunked_array([_encode(values, rng)]),
        "unused entries": pa.chunked_array([_encode(values, rng, unused=5)]),
        "duplicate entries": pa.chunked_array([_encode(values, rng, copies=3, unused=2)]),
        "null entry": pa.chunked_array([_encode(values, rng, null_entry=True)]),
        "sliced": pa.chunked_array([_encode(values, rng, junk=9, unused=1)]),
        "chunks, own dictionaries": pa.chunked_array(
            [_encode(values[:cut], rng, unused=3), _encode([], rng),
             _encode(values[cut:], rng, copies=2, null_entry=True, junk=4)], type=typ),
        "chunks, one dictionary": pa.chunked_array([shared.slice(0, cut), shared.slice(cut)],
                                                   type=typ),
    }


def _texts_of(rng: np.random.Generator, n: int, distinct: int, null_share: float) -> list:
    pool = [f"{WORDS[i % len(WORDS)]}{i}" for i in range(distinct)]
    picks = rng.integers(0, distinct, n)
    null = rng.random(n) < null_share
    return [None if z else pool[p] for z, p in zip(null, picks, strict=True)]


@pytest.mark.parametrize("distinct,compact_max", [(3, 4096), (300, 4096), (40, 8), (3, 1)])
def test_dictionary_layouts_never_count(monkeypatch, distinct, compact_max):
    """Dictionary order, unused and repeated entries, null entries, slices and per-chunk
    dictionaries give one key, in the compact form and in the decoded one."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", compact_max)
    rng = np.random.default_rng(distinct)
    for null_share in (0.0, 0.2):
        values = _texts_of(rng, N, distinct, null_share)
        layouts = _dict_layouts(values, distinct)
        keys = {name: H(v) for name, v in layouts.items()}
        assert len(set(keys.values())) == 1, keys
        assert all(v.to_pylist() == values for v in layouts.values())
        table = pa.table({"c": layouts["duplicate entries"]})
        assert H(table) == H(pa.table({"c": layouts["chunks, own dictionaries"]}))


@pytest.mark.parametrize("compact_max", [4096, 2])
def test_dictionary_every_decoded_difference_counts(monkeypatch, compact_max):
    """A changed value, a null for a value, a value for a null, or a length is a new key, in any
    dictionary layout; so is the plain column and another value type."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", compact_max)
    rng = np.random.default_rng(1)
    values = _texts_of(rng, 40, 4, 0.2)
    i = next(k for k, v in enumerate(values) if v is not None)
    j = next(k for k, v in enumerate(values) if v is None)
    other = next(v for v in values if v is not None and v != values[i])
    changes = {"value": values[:i] + [other] + values[i + 1:],
               "unseen value": values[:i] + [values[i] + "!"] + values[i + 1:],
               "null": values[:i] + [None] + values[i + 1:],
               "not null": values[:j] + [other] + values[j + 1:],
               "longer": values + [values[i]], "shorter": values[:-1],
               "swapped": values[1:] + values[:1]}
    key = H(_encode(values, rng, copies=2, unused=1))
    for name, changed in changes.items():
        assert changed != values
        for layout in ({}, {"copies": 2, "unused": 3}, {"null_entry": True, "junk": 3}):
            assert H(_encode(changed, rng, **layout)) != key, (name, layout)
    assert H(pa.array(values)) != key
    assert H(_encode(values, rng, value_type=pa.large_string())) != key
    assert H(_encode(values, rng, index=pa.int8())) != key


@pytest.mark.parametrize("compact_max", [4096, 0])
@pytest.mark.parametrize("value_type", [pa.string(), pa.int64()])
def test_dictionary_null_entry_is_not_a_null_index(tmp_path, monkeypatch, compact_max, value_type):
    """A valid index to a null dictionary entry decodes to null, but Arrow does not count it as
    null (``null_count``, ``fill_null``, ``drop_null``): it keys apart from a null index, in the
    compact and the decoded form, in a table too, and where it lies in the column counts, not
    how the column is chunked. A null entry no slot refers to changes nothing."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", compact_max)
    x = "x" if value_type == pa.string() else 7
    by_entry = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()),
                                              pa.array([x, None], value_type))
    by_index = pa.DictionaryArray.from_arrays(pa.array([0, None, 0], pa.int8()),
                                              pa.array([x], value_type))
    assert by_entry.to_pylist() == by_index.to_pylist() == [x, None, x]

    @fncache.memoize(store=str(tmp_path / "s"))
    def clean(a):
        return a.fill_null(x).to_pylist(), a.drop_null().to_pylist(), a.null_count

    assert clean(by_entry) == ([x, None, x], [x, None, x], 0)
    assert clean(by_index) == ([x, x, x], [x, x], 1)
    assert H(by_entry) != H(by_index)
    assert H(pa.table({"c": by_entry})) != H(pa.table({"c": by_index}))
    unused_entry = pa.DictionaryArray.from_arrays(pa.array([0, None, 0], pa.int8()),
                                                  pa.array([x, None], value_type))
    assert H(unused_entry) == H(by_index)
    # Where the slot lies counts (another row is another key), chunk boundaries do not.
    later = pa.DictionaryArray.from_arrays(pa.array([0, 0, 1], pa.int8()),
                                           pa.array([x, None], value_type))
    assert H(later) != H(pa.DictionaryArray.from_arrays(pa.array([0, 0, None], pa.int8()),
                                                        pa.array([x], value_type)))
    assert H(pa.chunked_array([by_entry])) != H(pa.chunked_array([later]))
    assert H(pa.chunked_array([by_entry.slice(0, 1), by_entry.slice(1)])) == \
        H(pa.chunked_array([by_entry]))
    all_null = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int8()),
                                              pa.array([], value_type))
    assert H(all_null) == H(pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int8()),
                                                           pa.array([x, None], value_type)))
    assert H(all_null) != H(pa.DictionaryArray.from_arrays(pa.array([1, 1], pa.int8()),
                                                           pa.array([x, None], value_type)))


def test_dictionary_of_many_repeated_entries_keys_by_values(monkeypatch):
    """More entries than the compact form allows, all copies of a few values, key like a
    dictionary of those few values (the form follows the values, not the dictionary)."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", 4)
    rng = np.random.default_rng(4)
    values = _texts_of(rng, N, 3, 0.1)
    assert H(_encode(values, rng, copies=40)) == H(_encode(values, rng))
    many = _texts_of(rng, N, 30, 0.1)
    assert H(_encode(many, rng, copies=3)) == H(_encode(many, rng, unused=7))


def test_nested_and_non_string_dictionaries_key_by_values():
    """Dictionaries inside structs and lists, and of numbers, key by decoded values too."""
    rng = np.random.default_rng(6)
    values = _texts_of(rng, 30, 4, 0.2)
    one, two = _encode(values, rng), _encode(values, rng, copies=2, unused=3, null_entry=True)
    assert H(pa.StructArray.from_arrays([one], ["c"])) == \
        H(pa.StructArray.from_arrays([two], ["c"]))
    offsets = pa.array([0, 10, 10, 30], pa.int32())
    assert H(pa.ListArray.from_arrays(offsets, one)) == H(pa.ListArray.from_arrays(offsets, two))
    changed = _encode(values[:-1] + ["new"], rng)
    assert H(pa.ListArray.from_arrays(offsets, changed)) != H(pa.ListArray.from_arrays(offsets, one))
    ints = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0]), pa.array([7, 8]))
    assert H(ints) == H(pa.DictionaryArray.from_arrays(pa.array([2, 0, 2]), pa.array([8, 9, 7])))
    assert H(ints) != H(pa.DictionaryArray.from_arrays(pa.array([0, 1, 1]), pa.array([7, 8])))
    floats = pa.DictionaryArray.from_arrays(pa.array([0, 1]), pa.array([0.0, -0.0]))
    assert H(floats) != H(pa.DictionaryArray.from_arrays(pa.array([0, 0]), pa.array([0.0, -0.0])))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.none(), st.sampled_from(WORDS)), max_size=30), st.integers(0, 99),
       st.sampled_from([4096, 2]), st.data())
def test_dictionary_keys_are_equal_exactly_when_decoded_values_are(monkeypatch, values, seed,
                                                                  compact_max, data):
    """Any two dictionary layouts key alike exactly when they decode to equal values."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", compact_max)
    layouts = _dict_layouts(values, seed)
    keys = {name: H(v) for name, v in layouts.items()}
    assert len(set(keys.values())) == 1, keys
    other = data.draw(st.lists(st.one_of(st.none(), st.sampled_from(WORDS)), max_size=30))
    rng = np.random.default_rng(seed)
    key = H(pa.chunked_array([_encode(other, rng, copies=2, unused=1, null_entry=True)]))
    assert (key == keys["permuted"]) == (other == values)


def test_dictionary_form_follows_the_values_at_the_limit(monkeypatch):
    """Exactly as many values as the compact form allows, plus nulls held by a null entry or by
    null indices, in the first rows or later: one key."""
    monkeypatch.setattr(_values_arrow, "_COMPACT_MAX", 4)
    rng = np.random.default_rng(8)
    values = ["a", "b", None, "c", "d"] * 8 + [None if v is None else "abcd"[len(v) % 4]
                                              for v in _texts_of(rng, N, 4, 0.3)]
    keys = {H(_encode(values, rng, null_entry=null_entry, copies=copies))
            for null_entry in (False, True) for copies in (1, 3)}
    assert len(keys) == 1
    assert H(_encode(values[:-1] + ["e"], rng)) not in keys


# String and binary views: keyed as the plain arrays they stand for, whatever their layout.

VIEW_VALUES = st.lists(st.one_of(st.none(), st.text(max_size=14),
                                 st.text(min_size=13, max_size=40),
                                 st.binary(min_size=200, max_size=700).map(lambda b: b.hex()[:600])),
                       max_size=40)


def _view_layout(values: list, typ: pa.DataType, padding: bytes, split: int) -> pa.Array:
    """``values`` as views built by hand: inline values padded with ``padding`` bytes (the
    format says zeros, readers must not rely on it), other values in two data buffers (the
    first ``split`` of them in the second, after junk), null slots' views full of junk."""
    binary = pa.types.is_binary_view(typ)
    raw = [None if v is None else (v.encode() if isinstance(v, str) else v) for v in values]
    if binary:
        raw = [None if v is None else v[::-1] for v in raw]  # other bytes than the strings'
    buffers = [bytearray(b"head"), bytearray(b"junk-junk")]
    views = bytearray()
    k = 0
    for v in raw:
        if v is None:
            views += bytes(range(16, 32))
        elif len(v) <= 12:
            views += len(v).to_bytes(4, "little") + v + (padding * 12)[:12 - len(v)]
        else:
            index = 1 if k < split else 0
            k += 1
            offset = len(buffers[index])
            buffers[index] += v
            views += (len(v).to_bytes(4, "little") + v[:4] + index.to_bytes(4, "little")
                      + offset.to_bytes(4, "little"))
    valid = np.array([v is not None for v in raw], dtype=bool)
    return pa.Array.from_buffers(typ, len(raw), [_bitmap(valid), pa.py_buffer(bytes(views)),
                                                 pa.py_buffer(bytes(buffers[0])),
                                                 pa.py_buffer(bytes(buffers[1]))])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=VIEW_VALUES, split=st.integers(0, 5), start=st.integers(0, 9),
       typ=st.sampled_from([pa.string_view(), pa.binary_view()]))
def test_views_key_as_the_plain_arrays_they_stand_for(monkeypatch, values, split, start, typ):
    """Inline or in either buffer, padded with zeros or junk, sliced at any offset, in chunks,
    through Arrow's own builder: one key, and the content of the plain large array."""
    plain_type = pa.large_binary() if pa.types.is_binary_view(typ) else pa.large_string()
    built = _view_layout(values, typ, b"\0", split)
    plain = pa.array(built.to_pylist(), plain_type)
    for arr in (_view_layout(values, typ, b"\xa5", split),
                _view_layout(values, typ, b"\0", 0),
                pa.array(built.to_pylist(), typ)):
        assert H(arr) == H(built)
    assert _values_arrow.chunks_content([built]) == _values_arrow.chunks_content([plain])
    cut = min(start, len(values))
    assert H(pa.chunked_array([built.slice(0, cut), built.slice(cut)], typ)) \
        == H(pa.chunked_array([pa.array(built.to_pylist(), typ)], typ))
    assert H(built.slice(cut)) == H(pa.array(built.slice(cut).to_pylist(), typ))


def test_views_every_value_counts():
    """A changed byte, a value moved across the inline limit, or a null: a new key."""
    values = ["a", "twelve bytes", "thirteen byte", None, "x" * 300, ""]
    key = H(pa.array(values, pa.string_view()))
    for changed in (["b", *values[1:]], ["a", "twelve bytez", *values[2:]],
                    [*values[:2], "thirteen bytf", *values[3:]], [*values[:4], "x" * 299 + "y", ""],
                    [*values[:5], None], [*values[:3], "", *values[4:]],
                    ["a", "twelve byte", "sthirteen byte", *values[3:]]):
        assert H(pa.array(changed, pa.string_view())) != key, changed

