"""Value classes across code edits: a library-type subclass is keyed by its code, its state by value.

Each test runs a script three times in fresh interpreters at one path (version 1, version 2, version 1
again) and compares the keys it prints: editing a method of a numpy masked-array, torch tensor or
pandas frame subclass gives a new key and going back gives the old one; a GeoSeries's CRS and a frame
subclass's ``_metadata`` attribute are content. The equal-key tests pin values that are one value
however they were built: sparse matrices before and after their lazy flags are set, xarray objects
before and after ``attrs`` is read, instances whose attributes were set in another order.
"""

from __future__ import annotations

import json
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import fncache

from .helpers import last_json, run_py

_SUBCLASSES = {
    "numpy masked": """
        import numpy as np

        class Masked(np.ma.MaskedArray):
            def scaled(self):
                return self * 2  #@v1 ... #@v2 return self * 3

        value = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0]).view(Masked)
    """,
    "numpy subclass": """
        import numpy as np

        class Signal(np.ndarray):
            def scaled(self):
                return self * 2  #@v1 ... #@v2 return self * 3

        value = np.arange(3.0).view(Signal)
    """,
    "torch": """
        import torch

        class Boxes(torch.Tensor):
            def area(self):
                return self.prod()  #@v1 ... #@v2 return self.sum()

        value = torch.arange(4.0).as_subclass(Boxes)
    """,
    "pandas": """
        import pandas as pd

        class Frame(pd.DataFrame):
            @property
            def _constructor(self):
                return Frame

            def total(self):
                return self.sum()  #@v1 ... #@v2 return self.sum() * 2

        value = Frame({"a": [1, 2]})
    """,
}


def _version(source: str, version: str) -> str:
    """The script at ``version``: a line ``<v1 code>  #@v1 ... #@v2 <v2 code>`` becomes one of the two."""
    out = []
    for line in textwrap.dedent(source).splitlines():
        if "#@v1 ... #@v2" in line:
            first, second = line.split("#@v1 ... #@v2")
            indent = first[: len(first) - len(first.lstrip())]
            line = first.rstrip() if version == "v1" else indent + second.strip()
        out.append(line)
    return "\n".join(out)


def _keys_over_versions(tmp_path: Path, source: str) -> dict[str, str]:
    script = tmp_path / "script.py"
    body = textwrap.dedent(source) + "\nimport fncache, json\nprint(json.dumps(fncache.hash(value)))\n"
    keys = {}
    for run, version, seed in (("v1", "v1", "1"), ("v2", "v2", "2"), ("v1_again", "v1", "3")):
        script.write_text(_version(body, version))
        keys[run] = last_json(run_py(script, cwd=tmp_path, seed=seed))
    return keys


@pytest.mark.parametrize("library", sorted(_SUBCLASSES))
def test_editing_a_library_subclass_method_changes_the_key(tmp_path, library):
    """A method edit of a numpy masked, torch or pandas subclass is a new key; reverting it the old."""
    pytest.importorskip(library.split()[0])
    keys = _keys_over_versions(tmp_path, _SUBCLASSES[library])
    assert keys["v1"] != keys["v2"]
    assert keys["v1_again"] == keys["v1"]


def test_a_crs_change_changes_the_key_across_processes(tmp_path):
    """One point set in EPSG:4326, then EPSG:3857, then 4326 again: two keys, the first one back."""
    pytest.importorskip("geopandas")
    source = """
        import geopandas as gpd
        crs = 4326  #@v1 ... #@v2 crs = 3857
        value = gpd.GeoSeries.from_xy([1.0, 2.0], [3.0, 4.0], crs=crs)
    """
    keys = _keys_over_versions(tmp_path, source)
    assert keys["v1"] != keys["v2"]
    assert keys["v1_again"] == keys["v1"]


def test_a_metadata_attribute_change_changes_the_key_across_processes(tmp_path):
    """A frame subclass's ``_metadata`` attribute ``unit``: "m", then "km", then "m" again."""
    pytest.importorskip("pandas")
    source = """
        import pandas as pd

        class Measured(pd.DataFrame):
            _metadata = ["unit"]

        value = Measured({"a": [1.0, 2.0]})
        value.unit = "m"  #@v1 ... #@v2 value.unit = "km"
    """
    keys = _keys_over_versions(tmp_path, source)
    assert keys["v1"] != keys["v2"]
    assert keys["v1_again"] == keys["v1"]


def test_an_ndarray_subclass_attribute_changes_the_key_across_processes(tmp_path):
    """numpy's pickle of a subclass keeps the elements and drops the instance's attributes, so
    ``Signal(x, fs=100)`` and ``Signal(x, fs=200)`` had one key: the second call was served the
    first's result. 100, then 200, then 100 again."""
    source = """
        import numpy as np

        class Signal(np.ndarray):
            def __new__(cls, data, fs):
                out = np.asarray(data, dtype=float).view(cls)
                out.fs = fs
                return out

            def __array_finalize__(self, obj):
                self.fs = getattr(obj, "fs", None)

        value = Signal([1.0, 2.0, 3.0], fs=100)  #@v1 ... #@v2 value = Signal([1.0, 2.0, 3.0], fs=200)
    """
    keys = _keys_over_versions(tmp_path, source)
    assert keys["v1"] != keys["v2"]
    assert keys["v1_again"] == keys["v1"]


def test_library_ndarray_subclasses_keep_their_pickle_and_a_user_view_is_its_own_value():
    """np.matrix and np.recarray are keyed as they pickle (not as the user's subclasses); a plain
    array and a user subclass's view of it are two values, and equal views are one."""
    np = pytest.importorskip("numpy")
    import pickle

    class View(np.ndarray):
        pass

    plain = np.arange(4.0)
    assert fncache.hash(plain.view(View)) == fncache.hash(np.arange(4.0).view(View))
    assert fncache.hash(plain.view(View)) != fncache.hash(plain)
    matrix = np.matrix([[1, 2]])
    assert fncache.hash(matrix) == fncache.hash(pickle.loads(pickle.dumps(matrix)))
    assert fncache.hash(matrix) != fncache.hash(np.array([[1, 2]]))
    records = np.rec.array([(1, 2.0)], dtype=[("a", int), ("b", float)])
    assert fncache.hash(records) == fncache.hash(pickle.loads(pickle.dumps(records)))


def test_ndarray_subclasses_that_declare_their_state_or_hold_a_map_or_themselves():
    """A subclass with its own ``__reduce__`` (slots written by it, a cache and a lock left out) is
    keyed as it pickles; a user's memmap subclass as the array it holds (not where its file is);
    one made by exec'd code (user code of no file) keys its attributes; one whose attribute is
    itself is keyed, not refused."""
    np = pytest.importorskip("numpy")
    import threading

    class Declared(np.ndarray):
        __slots__ = ("fs", "cache", "lock")

        def __reduce__(self):
            base = super().__reduce__()
            return (base[0], base[1], (base[2], self.fs))

        def __setstate__(self, state):
            super().__setstate__(state[0])
            self.fs = state[1]

    def declared(fs):
        out = np.arange(3.0).view(Declared)
        out.fs, out.cache, out.lock = fs, {}, threading.Lock()
        return out

    first = declared(100)
    key = fncache.hash(first)
    first.cache["spectrum"] = 1
    assert fncache.hash(first) == key == fncache.hash(declared(100))
    assert fncache.hash(declared(200)) != key

    class Frames(np.memmap):
        pass

    import tempfile

    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        maps = []
        for d in (d1, d2):
            m = np.memmap(Path(d) / "f.bin", dtype="<f8", mode="w+", shape=(4,))
            m[:] = [1, 2, 3, 4]
            maps.append(m.view(Frames))
        assert fncache.hash(maps[0]) == fncache.hash(maps[1])
        del maps, m

    namespace: dict[str, object] = {"__name__": "sandbox"}  # code exec'd under a module of no file
    exec("import numpy as np\nclass Signal(np.ndarray):\n    pass\n", namespace)
    made = [np.arange(3.0).view(namespace["Signal"]) for _ in range(2)]
    made[0].fs, made[1].fs = 100, 200
    assert fncache.hash(made[0]) != fncache.hash(made[1])

    class Looped(np.ndarray):
        pass

    looped = np.arange(3.0).view(Looped)
    looped.me = looped
    assert fncache.hash(looped) == fncache.hash(looped)


# ---------------------------------------------------------------------------------------------
# Equal values, one key
# ---------------------------------------------------------------------------------------------


def test_sparse_matrices_equal_in_meaning_share_a_key():
    """A sparse matrix, its copy, after a flag query, unsorted vs sorted indices, duplicates vs summed."""
    sp = pytest.importorskip("scipy.sparse")
    import numpy as np

    a = sp.csr_matrix(np.array([[0, 1.0, 2.0], [3.0, 0, 0]]))
    queried = a.copy()
    assert queried.has_sorted_indices
    unsorted = sp.csr_matrix((np.array([2.0, 1.0, 3.0]), np.array([2, 1, 0]), np.array([0, 2, 3])),
                             shape=(2, 3))
    assert fncache.hash(a) == fncache.hash(a.copy()) == fncache.hash(queried) == fncache.hash(unsorted)
    dup = sp.coo_matrix((np.array([1.0, 1.0]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    summed = sp.coo_matrix((np.array([2.0]), (np.array([0]), np.array([1]))), shape=(2, 2))
    assert fncache.hash(dup) == fncache.hash(summed)
    assert fncache.hash(summed) != fncache.hash(summed * 2)


def test_xarray_objects_before_and_after_attrs_is_read_share_a_key():
    """``attrs``/``encoding`` made lazily (None, then {}) are one value; a real attribute is content."""
    xr = pytest.importorskip("xarray")
    import numpy as np

    v = xr.Variable("x", np.arange(3))
    fresh = fncache.hash(v)
    v.attrs  # noqa: B018 - reading it creates the dictionary
    v.encoding  # noqa: B018
    assert fncache.hash(v) == fresh
    da = xr.DataArray(np.arange(3), dims="x", coords={"x": [1, 2, 3]}, name="v")
    before = fncache.hash(da)
    da.x.attrs  # noqa: B018
    assert fncache.hash(da) == before == fncache.hash(da.copy())
    da.attrs["units"] = "m"
    assert fncache.hash(da) != before
    ds = xr.Dataset({"v": ("x", np.arange(3))})
    assert fncache.hash(ds) == fncache.hash(ds.copy())


class _Point:
    def __init__(self, x: float, y: float, first: str = "x") -> None:
        if first == "x":
            self.x, self.y = x, y
        else:
            self.y, self.x = y, x


def test_instances_with_attributes_set_in_another_order_share_a_key():
    """Attribute order is not content (as a class's namespace order is not); values still are."""
    assert list(vars(_Point(1, 2, "y"))) == ["y", "x"]
    assert fncache.hash(_Point(1, 2, "x")) == fncache.hash(_Point(1, 2, "y"))
    assert fncache.hash(_Point(1, 2)) != fncache.hash(_Point(2, 1))
    a = types.SimpleNamespace(**{"a": 1, "b": 2})
    b = types.SimpleNamespace(**{"b": 2, "a": 1})
    assert a == b and fncache.hash(a) == fncache.hash(b)
    assert fncache.hash(a) != fncache.hash(types.SimpleNamespace(a=1, b=3))


def test_a_sliced_polars_struct_column_with_nulls_keys_as_built_fresh():
    """``s[1:]`` of a struct column with nulls and the same rows built fresh are one value."""
    pl = pytest.importorskip("polars")
    s = pl.Series("s", [{"a": 1, "b": "x"}, None, {"a": 3, "b": None}, {"a": 4, "b": "y"}])
    fresh = pl.Series("s", [None, {"a": 3, "b": None}, {"a": 4, "b": "y"}])
    assert fncache.hash(s[1:]) == fncache.hash(fresh)
    assert fncache.hash(s[1:]) != fncache.hash(s[2:])


def test_polars_subclass_and_its_attributes_are_content():
    """A user's polars DataFrame subclass is not a plain frame, and its own attributes count."""
    pl = pytest.importorskip("polars")

    class Tagged(pl.DataFrame):
        pass

    plain = pl.DataFrame({"a": [1, 2]})
    tagged = Tagged({"a": [1, 2]})
    assert fncache.hash(plain) != fncache.hash(tagged)
    other = Tagged({"a": [1, 2]})
    other.unit = "m"
    assert fncache.hash(tagged) != fncache.hash(other)
    json.dumps(fncache.hash(other))  # a plain hex digest


def test_an_instance_holding_itself_with_attributes_out_of_order_is_keyed():
    """A cycle through an instance whose attributes are re-ordered is found and keyed, alike twice."""

    def make(order: str) -> _Point:
        p = _Point(1, 2, order)
        p.me = p
        return p

    assert fncache.hash(make("y")) == fncache.hash(make("y")) == fncache.hash(make("x"))
    other = make("y")
    other.x = 5
    assert fncache.hash(other) != fncache.hash(make("y"))


def _stdlib_subclasses() -> list[tuple[str, Any]]:
    """(name, make(tag)) of a user's subclass of a library class whose pickle makes the instance
    from its value alone, holding one attribute beside it (a slot where the base has slots only)."""
    import collections
    import datetime
    import decimal
    import fractions
    import ipaddress
    import pathlib

    def sub(base: type, *args: Any, slots: bool = False) -> Any:
        body = {"__module__": __name__, **({"__slots__": ("tag",)} if slots else {})}
        cls = type(f"My{base.__name__}", (base,), body)

        def make(tag: str) -> Any:
            value = cls(*args)
            value.tag = tag
            return value

        return make

    return [("datetime", sub(datetime.datetime, 2020, 1, 1)),
            ("date", sub(datetime.date, 2020, 1, 1)),
            ("timedelta", sub(datetime.timedelta, 3)),
            ("Decimal, a slot", sub(decimal.Decimal, "1.0", slots=True)),
            ("Fraction", sub(fractions.Fraction, 1, 3)),
            ("PurePosixPath", sub(pathlib.PurePosixPath, "a/b")),
            ("IPv4Address", sub(ipaddress.IPv4Address, "10.0.0.1")),
            ("Counter", sub(collections.Counter, {"a": 1})),
            ("defaultdict", sub(collections.defaultdict, list))]


@pytest.mark.parametrize("kind", [k for k, _ in _stdlib_subclasses()])
def test_a_stdlib_subclass_instance_attribute_is_content(tmp_path, kind):
    """The pickle of a subclass of ``datetime``, ``Decimal``, ``Counter``... drops the instance's
    attributes (its base's reduce makes it from its value alone): ``Stamp(2020, 1, 1)`` labelled
    "start" and one labelled "end" had one key, and the second call was served "start". Equal
    values with equal attributes still share a key."""
    make = dict(_stdlib_subclasses())[kind]
    tag_of = fncache.memoize(store=str(tmp_path / "cache"))(_tag_of)
    assert [tag_of(make("start")), tag_of(make("end"))] == ["start", "end"]
    assert tag_of(make("start")) == "start" and tag_of.cache_info().hits == 1
    assert fncache.hash(make("end")) == fncache.hash(make("end"))


def _tag_of(value: Any) -> str:
    return str(value.tag)


def test_a_library_cached_property_read_keeps_a_subclass_instance_key(tmp_path):
    """``IPv4Network`` stores ``broadcast_address`` in the instance's ``__dict__`` once read: a
    derived value, so reading it keeps a subclass instance's key (the call hits)."""
    import ipaddress

    net_class = type("Net", (ipaddress.IPv4Network,), {"__module__": __name__})
    size = fncache.memoize(store=str(tmp_path / "cache"))(_size)
    net = net_class("10.0.0.0/8")
    before = fncache.hash(net)
    assert size(net) == 2**24 - 1 and fncache.hash(net) == before
    assert size(net) == 2**24 - 1 and size.cache_info().hits == 1


def _size(net: Any) -> int:
    return int(net.broadcast_address) - int(net.network_address)
