"""Canonical hashing: equal content gives one digest everywhere; different content never does."""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import pickle
import shutil
import sys
import threading

import cloudpickle
import numpy as np
import pytest

import fncache
from fncache.values import hasher as _hasher

from .helpers import REPO, last_json, run_py

CASES = REPO / "tests" / "data" / "digest_cases.py"


@pytest.fixture(scope="module")
def case_runs(tmp_path_factory):
    """The digest table computed by fresh interpreters: 3 hash seeds, 2 checkout directories."""
    base = tmp_path_factory.mktemp("checkouts")
    copies = []
    for name in ("checkout-a", "elsewhere/checkout-b"):
        d = base / name
        d.mkdir(parents=True)
        shutil.copy(CASES, d / "digest_cases.py")
        copies.append(d / "digest_cases.py")
    pkl = base / "objects.pkl"
    runs = {
        "seed1-a": last_json(run_py(copies[0], "dump", str(pkl), seed="1", cwd=base)),
        "seed2-b": last_json(run_py(copies[1], seed="2", cwd=copies[1].parent)),
        "random-a": last_json(run_py(copies[0], seed="random", cwd="/")),
    }
    runs["roundtrip-b"] = last_json(run_py(copies[1], "load", str(pkl), seed="7"))
    return runs


@pytest.mark.slow
def test_digests_identical_across_seeds_and_checkouts(case_runs):
    """Every case digests the same under PYTHONHASHSEED 1, 2 and random, from two directories."""
    reference = case_runs["seed1-a"]
    assert len(reference) > 30
    for name in ("seed2-b", "random-a"):
        diff = {k for k in reference if case_runs[name].get(k) != reference[k]}
        assert not diff, f"{name} differs on {sorted(diff)}"


@pytest.mark.slow
def test_cloudpickle_roundtrip_in_another_process_keeps_digest(case_runs):
    """Dynamic functions and classes digest the same after a cloudpickle trip to another process."""
    loaded = case_runs["roundtrip-b"]
    assert loaded, "no dynamic objects were round-tripped"
    for name, d in loaded.items():
        assert d == case_runs["seed1-a"][name], name


@pytest.mark.slow
def test_distinct_values_are_not_conflated(case_runs):
    """Numbers, strings, containers and dtypes that compare equal or look alike still differ."""
    d = case_runs["seed1-a"]
    groups = [
        ("int", "float", "bool"),
        ("str", "bytes"),
        ("list", "tuple"),
        ("zero", "neg_zero"),
        ("dict_ab", "dict_ba"),
        ("np_c", "np_f32", "np_shape"),
    ]
    for group in groups:
        got = [d[k] for k in group if k in d]
        assert len(set(got)) == len(got), group


@pytest.mark.slow
def test_sharing_and_interning_do_not_matter(case_runs):
    """A list of one shared string and of two equal but distinct strings digest alike."""
    d = case_runs["seed1-a"]
    assert d["interning_shared"] == d["interning_runtime"]


@pytest.mark.slow
def test_equal_paths_spelled_differently_hash_alike(case_runs):
    """``a//b``, ``a/b`` and ``("a", "b")`` are one path and one key on every Python (3.12+ paths
    pickle their spelling); a different path, an absolute one or another path class is not."""
    d = case_runs["seed1-a"]
    assert d["path_plain"] == d["path_doubled"] == d["path_parts"]
    assert len({d["path_plain"], d["path_other"], d["path_absolute"], d["path_concrete"]}) == 4


@pytest.mark.slow
def test_array_layouts_hash_alike(case_runs):
    """Equal arrays in C order, Fortran order and as a strided view give one digest."""
    d = case_runs["seed1-a"]
    if "np_c" not in d:
        pytest.skip("numpy not installed")
    assert d["np_c"] == d["np_f"] == d["np_view"]


def test_roundtrip_in_process_keeps_digest():
    """A function and a class rebuilt by cloudpickle in the same process keep their digest."""
    sys.path.insert(0, str(CASES.parent))
    try:
        import digest_cases as dc
    finally:
        sys.path.remove(str(CASES.parent))
    for name, obj in dc.dynamic_objects().items():
        again = cloudpickle.loads(cloudpickle.dumps(obj))
        assert fncache.hash(again) == fncache.hash(obj), name


def test_sets_ignore_insertion_order():
    """Sets and frozensets, nested and mixed, digest by content whatever their iteration order."""
    a = {"x", "y", "z", 1, (2, 3), frozenset({"p", "q"})}
    b = set()
    for item in [frozenset({"q", "p"}), (2, 3), 1, "z", "y", "x"]:
        b.add(item)
    assert fncache.hash(a) == fncache.hash(b)
    assert fncache.hash(a) != fncache.hash(frozenset(a))
    assert fncache.hash({1, 2}) != fncache.hash({1, 3})


def test_dict_order_is_significant():
    """Dicts with the same items in another insertion order are different values."""
    assert fncache.hash({"a": 1, "b": 2}) != fncache.hash({"b": 2, "a": 1})
    assert fncache.hash({"a": 1, "b": 2}) == fncache.hash(dict([("a", 1), ("b", 2)]))


def test_cyclic_values_hash_deterministically():
    """A self-referencing list digests the same each time and unlike a different cycle."""
    a = [1, "x"]
    a.append(a)
    b = [1, "x"]
    b.append(b)
    c = [2, "x"]
    c.append(c)
    assert fncache.hash(a) == fncache.hash(b)
    assert fncache.hash(a) != fncache.hash(c)


def test_code_ignores_lines_filenames_and_docstrings():
    """The same function compiled from other files, at other lines, with a docstring, digests alike."""
    src = "def f(x):\n    return [x, {'a', 'b'}]\n"
    ns1: dict = {}
    ns2: dict = {}
    ns3: dict = {}
    exec(compile(src, "/one/place.py", "exec"), ns1)
    exec(compile("\n\n\n# comment\n" + src, "/another/place.py", "exec"), ns2)
    exec(compile(src.replace(":\n", ':\n    """Doc."""\n', 1), "x.py", "exec"), ns3)
    assert fncache.hash(ns1["f"]) == fncache.hash(ns2["f"]) == fncache.hash(ns3["f"])
    ns4: dict = {}
    exec(compile(src.replace("'b'", "'c'"), "/one/place.py", "exec"), ns4)
    assert fncache.hash(ns4["f"]) != fncache.hash(ns1["f"])


def test_partial_and_lambda_by_value():
    """functools.partial and lambdas digest by what they do and hold, not by identity."""

    def base(a, b):
        return a + b

    assert fncache.hash(functools.partial(base, 1)) == fncache.hash(functools.partial(base, 1))
    assert fncache.hash(functools.partial(base, 1)) != fncache.hash(functools.partial(base, 2))
    assert fncache.hash(lambda x: x + 1) == fncache.hash(lambda x: x + 1)
    assert fncache.hash(lambda x: x + 1) != fncache.hash(lambda x: x + 2)


def test_unhashable_values_raise_typed_error():
    """A lock or a generator raises UnhashableArgument, which is also a TypeError."""
    for bad in (threading.Lock(), (i for i in range(3))):
        with pytest.raises(fncache.UnhashableArgument) as info:
            fncache.hash(bad)
        assert isinstance(info.value, TypeError)
        assert type(bad).__name__ in str(info.value)


def test_registered_type_rejected_for_builtins():
    """Registering a builtin container would be silently ignored by the C pickler, so it is refused."""
    with pytest.raises(TypeError, match="dict"):
        fncache.register(dict, lambda d: 1)


def test_hash_streams_are_not_unpicklable_payloads():
    """The marker standing for tokens cannot be called: nothing hashed is ever meant to be loaded."""
    with pytest.raises(TypeError):
        _hasher._Token("x")
    assert pickle.dumps(1)  # the module does not disturb ordinary pickling


KNOWN = REPO / "tests" / "data" / "known_keys.json"


def _known_inputs():
    import pyarrow as pa
    sys.path.insert(0, str(CASES.parent))
    try:
        import digest_cases as dc
    finally:
        sys.path.remove(str(CASES.parent))
    values = {
        "int": 1,
        "str": "fncache",
        "tuple": (1, 2.5, "x", b"y", None, True),
        "dict": {"a": [1, 2], "b": {"c": (3,)}},
        "set": {"alpha", "beta", "gamma"},
        "frozenset_mixed": frozenset({1, "a", (2,)}),
        "ndarray_int64_2x3": np.arange(6, dtype="<i8").reshape(2, 3),
        "ndarray_fortran_view": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3))[:, ::2],
        # Arrow columns with nulls: strings (offsets) and numbers (zeroed null slots).
        "arrow_strings_nullable": pa.array(["a", None, "ccc", ""]),
        "arrow_int64_nullable": pa.array([1, None, 3], type=pa.int64()),
        "arrow_dictionary": pa.array(["b", "a", None, "b"]).dictionary_encode(),
        # Views (read in place by the native kernel, cast without it) and polars strings (views).
        "arrow_string_view": pa.array(["a", None, "a string longer than twelve bytes", ""],
                                      pa.string_view()),
        "arrow_binary_view": pa.array([b"x", None, b"binary value past twelve bytes"],
                                      pa.binary_view()),
        # 3.12+ pickle a path's spelling; keyed as 3.11 pickles it (the class and normalised parts).
        "path_posix": pathlib.PurePosixPath("data//raw", "x.csv"),
        "path_concrete": pathlib.Path("/data/raw/x.csv"),
    }
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        values["polars_strings"] = pl.Series("s", ["a", None, "a string longer than twelve bytes", ""])
    keys = {
        "uses_helper(1)": fncache.key_for(dc.uses_helper, 1),
        "uses_helper(x='p', scale=1.5)": fncache.key_for(dc.uses_helper, x="p", scale=1.5),
        "closure(5)(3)": fncache.key_for(dc.make_closure(5), 3),
        "Point.norm(Point(1, 2))": fncache.key_for(dc.Point.norm, dc.Point(1.0, 2.0)),
    }
    return {k: fncache.hash(v) for k, v in values.items()}, keys


# The interpreters CI runs the suite on (README "Python versions"): each must have recorded keys. The
# first is the reference for value digests; another records only the values that legitimately
# differ on it (a stdlib class that moved module, say), under ``values_by_python``.
TESTED_PYTHONS = ("3.11", "3.13")
_MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _expected_values(table):
    return {**table["values"], **table.get("values_by_python", {}).get(_MINOR, {})}


def test_known_keys_have_not_changed():
    """Keys of fixed calls match the recorded table: a key-format change must be deliberate.

    After an intended change, bump KEY_SCHEMA, note it in CHANGES.md and regenerate with
    ``python -m tests.test_hasher`` on every interpreter of ``TESTED_PYTHONS``.
    """
    table = json.loads(KNOWN.read_text())
    values, keys = _known_inputs()
    assert values == _expected_values(table)
    if _MINOR not in table["keys"]:
        assert _MINOR not in TESTED_PYTHONS, f"no recorded keys for Python {_MINOR}: record them"
        pytest.skip(f"no recorded keys for Python {_MINOR} (bytecode differs per version)")
    assert keys == table["keys"][_MINOR]


def test_known_keys_differ_between_interpreters_only_where_recorded():
    """Value digests are the reference interpreter's, but for the few entries recorded per version."""
    table = json.loads(KNOWN.read_text())
    for minor, overrides in table.get("values_by_python", {}).items():
        assert minor in TESTED_PYTHONS and minor != TESTED_PYTHONS[0]
        for name, digest in overrides.items():
            assert name in table["values"] and digest != table["values"][name], (minor, name)


if __name__ == "__main__":
    # Regenerate the known-keys table for this Python version.
    table = json.loads(KNOWN.read_text()) if KNOWN.exists() else {"values": {}, "keys": {}}
    values, keys = _known_inputs()
    if _MINOR == TESTED_PYTHONS[0]:
        table["values"] = values
    else:
        differ = {k: v for k, v in values.items() if table["values"].get(k) != v}
        table.setdefault("values_by_python", {})[_MINOR] = differ
        if not differ:
            del table["values_by_python"][_MINOR]
    table["keys"][_MINOR] = keys
    KNOWN.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    print(f"wrote {KNOWN}")


def test_ref_refuses_values_shared_by_identity():
    """ref() on an int or a string would key every equal value by the token, so it is refused."""
    for value in (1, "a", (1, 2), None):
        with pytest.raises(TypeError, match="by value"):
            fncache.ref(value, "token")
    big = fncache.ref([1, 2, 3], "the-list")
    assert fncache.hash(big) != fncache.hash([1, 2, 3])
    assert fncache.hash(fncache.ref([4], "the-list")) == fncache.hash(big)


def test_an_int_not_seen_before_digests_as_the_canonical_pickler_writes_it():
    """The shortcut for an exact int that is not in the scalar memo (a new argument on a miss)
    gives the digest the canonical pickler gives it: keys are unchanged, for small, negative,
    64-bit edge and big ints alike (bools and int subclasses are not exact ints)."""
    import random

    rng = random.Random(5)
    values = [0, 1, -1, 255, 256, -256, 65535, 65536, 2**31 - 1, 2**31, -2**31, -2**31 - 1,
              2**63 - 1, 2**63, -2**63, 2**64 + 1, 10**40, -10**40, 2**3000, -(2**3000)]
    values += [rng.randint(-2**80, 2**80) for _ in range(300)]
    for v in values:
        _hasher._scalars.clear()
        assert _hasher.digest(v) == _hasher._digest(v, None), v
    assert _hasher.digest(True) != _hasher.digest(1)


def test_an_int_too_large_to_pickle_is_unhashable_not_a_crash(monkeypatch):
    """An exact int that pickle refuses (past what its opcodes hold: 2**34 bits and more) takes
    the canonical pickler's path, which names the failure as UnhashableArgument (then
    ``on_unhashable`` applies), rather than an OverflowError out of the key."""

    def refuse(obj, protocol):
        raise OverflowError("int too large to pickle")

    class Refusing(_hasher._Hasher):
        def dump(self, obj):
            raise OverflowError("int too large to pickle")

    monkeypatch.setattr(_hasher, "_dumps", refuse)
    monkeypatch.setattr(_hasher, "_Hasher", Refusing)
    monkeypatch.setattr(_hasher._local, "pool", [], raising=False)
    _hasher._scalars.clear()
    with pytest.raises(fncache.UnhashableArgument):
        _hasher.digest(12345678901234567890)
    assert (int, 12345678901234567890) not in _hasher._scalars


class _Setting:
    """A singleton that pickles by its global's name (``__reduce__`` returns a string)."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __reduce__(self):
        return self.name


SETTING_A = _Setting(name="SETTING_A", k=1, unit="m")
SETTING_B = _Setting(name="SETTING_B", k=2, unit="m")
SETTING_C = _Setting(unit="m", k=1, name="SETTING_A")  # SETTING_A's attributes, set in another order
SETTING_LOCKED = _Setting(name="SETTING_LOCKED", lock=threading.Lock())
SETTING_SELF = _Setting(name="SETTING_SELF", k=1)
SETTING_SELF.me = SETTING_SELF


def test_an_instance_pickled_by_name_is_keyed_by_its_attributes():
    """Pickle writes such an instance as its name alone, which kept a global's key when an edit
    changed what the code reads from it. Its attributes now count, in any order; one that holds a
    lock is keyed by its name and class (no error), one that holds itself does not recurse."""
    before = fncache.hash(SETTING_A)
    SETTING_A.k = 5
    try:
        assert fncache.hash(SETTING_A) != before
    finally:
        SETTING_A.k = 1
    assert fncache.hash(SETTING_A) == before == fncache.hash(SETTING_C)
    assert fncache.hash(SETTING_B) != before
    assert fncache.hash(SETTING_LOCKED) == fncache.hash(SETTING_LOCKED)  # by name, no error
    assert fncache.hash(SETTING_SELF) == fncache.hash(SETTING_SELF)


def _ascending(a, b):
    return (a > b) - (a < b)


def _descending(a, b):
    return (a < b) - (a > b)


def test_cmp_to_key_and_struct_are_keyed_by_what_they_hold():
    """Neither can be pickled, so a global holding one was keyed by its name: the comparison
    function (by its code) and the format count."""
    import struct

    up = fncache.hash(functools.cmp_to_key(_ascending))
    assert up == fncache.hash(functools.cmp_to_key(_ascending))
    assert up != fncache.hash(functools.cmp_to_key(_descending))
    assert fncache.hash(functools.cmp_to_key(_ascending)(3)) != fncache.hash(
        functools.cmp_to_key(_ascending)(4))
    assert fncache.hash(struct.Struct("<i")) == fncache.hash(struct.Struct("<i"))
    assert fncache.hash(struct.Struct("<i")) != fncache.hash(struct.Struct("<h"))


class _Registry(dict):
    """A by-name dict subclass: its items are its content."""

    def __reduce__(self):
        return "REGISTRY"


REGISTRY = _Registry(k=1)


class _Cached:
    """A by-name singleton whose ``__getstate__`` leaves its cache out, and that holds a lock."""

    def __init__(self, k):
        self.k, self.cache, self.lock = k, {}, threading.Lock()

    def __getstate__(self):
        return {"k": self.k, "lock": self.lock}

    def __reduce__(self):
        return "CACHED"


CACHED = _Cached(1)


class _Holder:
    DEFAULT: _Holder

    def __init__(self, k):
        self.k = k

    def __reduce__(self):
        return (getattr, (_Holder, "DEFAULT"))


_Holder.DEFAULT = _Holder(1)


def test_by_name_content_is_what_getstate_declares_with_items_and_unhashable_parts_by_type():
    """A by-name instance counts as its ``__getstate__`` says (a cache it leaves out does not move
    the key), with the items of a builtin base, an attribute that cannot be hashed (a lock) by its
    type while the others still count, and ``getattr(cls, name)`` is a name too."""
    before = fncache.hash(REGISTRY)
    REGISTRY["k"] = 2
    try:
        assert fncache.hash(REGISTRY) != before
    finally:
        REGISTRY["k"] = 1
    assert fncache.hash(REGISTRY) == before
    before = fncache.hash(CACHED)
    CACHED.cache["filled"] = 1
    assert fncache.hash(CACHED) == before
    CACHED.k = 2
    try:
        assert fncache.hash(CACHED) != before
    finally:
        CACHED.k = 1
    before = fncache.hash(_Holder.DEFAULT)
    _Holder.DEFAULT.k = 2
    try:
        assert fncache.hash(_Holder.DEFAULT) != before
    finally:
        _Holder.DEFAULT.k = 1
    looped = _Registry()
    looped["me"] = looped
    assert fncache.hash(looped) == fncache.hash(looped)


def _digests_of_everything() -> dict[str, str]:
    """Digests of the digest-case corpus plus the values that take the Python ``persistent_id``:
    sets and buffers inside containers, a cycle (a memo: strings and bytes by value), an object
    keyed by ``fncache.ref`` (while a ref exists every object takes it), a DataFrame and code."""
    import importlib.util

    import pandas as pd

    spec = importlib.util.spec_from_file_location("_digest_cases_native", CASES)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    out = cases.digests(cases.values()) | cases.digests(cases.numpy_values()) \
        | cases.digests(cases.dynamic_objects())
    cyclic: list = ["s", b"b", {"t"}]
    cyclic.append(cyclic)

    class Model:
        pass

    model = fncache.ref(Model(), "model-v1")
    out |= {
        "rows": fncache.hash([(i, str(i), float(i), None, b"x") for i in range(500)]),
        "config": fncache.hash({f"k{i}": [i, {"a": {i, -i}}, frozenset({str(i)})] for i in range(50)}),
        "buffer": fncache.hash([pickle.PickleBuffer(bytearray(b"abc")), "after"]),
        "cycle": fncache.hash(cyclic),
        "frame": fncache.hash(pd.DataFrame({"a": [1, 2], "s": ["x", "y"], "c": [{1}, {2}]})),
        "function": fncache.hash(_digests_of_everything),
    }
    out["with a ref"] = fncache.hash([model, "s", 1, (2, {3})])
    del model
    return out


def test_native_persistent_id_gives_the_python_methods_digests(monkeypatch):
    """The persistent_id answered in C (``fncache._speedups.persistent_ids``) gives every digest the
    Python method gives: the corpus of digest cases, sets, buffers, cycles, refs, frames, code."""
    from .helpers import require_native

    require_native()
    assert type(_hasher._Hasher().persistent_id).__name__ == "builtin_function_or_method"
    native = _digests_of_everything()
    monkeypatch.setattr(_hasher, "_persistent_ids", None)
    monkeypatch.setattr(_hasher._local, "pool", [])  # this thread's hashers were made with it
    assert type(_hasher._Hasher().persistent_id).__name__ == "method"
    python = _digests_of_everything()
    assert native == python
    assert len(set(python.values())) > 40  # (the corpus holds some equal values on purpose)


@dataclasses.dataclass
class _Record:
    x: int
    name: str


def test_a_class_is_checked_once_per_hash_and_again_in_the_next(monkeypatch):
    """Every instance reduces to its class, whose fingerprint is found and checked (its mutable
    values, a dataclass's fields, hashed again) once per hash, not once per instance (a list of
    dataclass instances took 70 us an instance for it); the next hash checks again, so an edit of
    the class between two hashes is a new digest, and the digests of equal lists stay equal."""
    from fncache.code import fingerprint as _fp

    checks = []
    real = _fp.Fingerprint.valid

    def counted(self):  # type: ignore[no-untyped-def]
        checks.append(self)
        return real(self)

    monkeypatch.setattr(_fp.Fingerprint, "valid", counted)
    records = [_Record(i, str(i)) for i in range(500)]
    first = fncache.hash(records)
    assert fncache.hash(records) == first == fncache.hash([_Record(i, str(i)) for i in range(500)])
    checks.clear()
    fncache.hash(records)
    assert 1 <= len(checks) < 50, len(checks)  # per class and what it reads, not per instance
    monkeypatch.setattr(_Record, "label", lambda self: self.name, raising=False)
    assert fncache.hash(records) != first
    monkeypatch.delattr(_Record, "label")
    assert fncache.hash(records) == first


class _Conf:
    mode = "x"

    def run(self):  # type: ignore[no-untyped-def]
        return _Conf.mode


class _Setter:
    """Sets ``_Conf.mode`` when it is pickled; its own pickle keeps nothing of the mode."""

    def __init__(self, mode):  # type: ignore[no-untyped-def]
        self.mode = mode

    def __reduce__(self):  # type: ignore[no-untyped-def]
        _Conf.mode = self.mode
        return (_Setter, ("",))


def test_a_class_changed_while_hashed_is_keyed_as_it_then_stands(monkeypatch):
    """A class met twice in one hash is made into a token once; if something the hash runs changes
    the class between its occurrences (a reducer with a side effect), the value is hashed again, so
    two values that leave the class in two states never share a key (found by a review: with the
    token of the first occurrence reused, ``fast`` and ``slow`` had one key)."""
    monkeypatch.setattr(_Conf, "mode", "x")
    keys = {}
    for mode in ("fast", "slow"):
        _Conf.mode = "x"
        keys[mode] = fncache.hash([_Conf, _Setter(mode), _Conf])
    assert keys["fast"] != keys["slow"]
    _Conf.mode = "x"
    assert fncache.hash([_Conf, _Setter("fast"), _Conf]) == keys["fast"]  # and stays deterministic
