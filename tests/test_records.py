"""The records on the import path (a store's entries and summaries, the options, the fingerprint)
take their methods from ``fncache._records`` rather than from ``@dataclass``: each behaves as the
dataclass that generates them would (compared here with one made from the same fields)."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

import pytest

from fncache._options import Options
from fncache.code.fingerprint import Fingerprint
from fncache.stores import EntryInfo
from fncache.stores._base import FunctionSummary


def _generated(cls: type, frozen: bool) -> type:
    """A dataclass with ``cls``'s fields (defaults, repr and compare flags) and generated methods."""
    fields = []
    for f in dataclasses.fields(cls):
        given = {"default": f.default} if f.default is not dataclasses.MISSING else \
            {"default_factory": f.default_factory} if f.default_factory is not dataclasses.MISSING \
            else {}
        fields.append((f.name, f.type, dataclasses.field(repr=f.repr, compare=f.compare, **given)))
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=frozen)


ENTRIES = [EntryInfo("k", 3, 1.5, None, {"function": "m:f"}),
           EntryInfo("k", 3, 1.5, 2.0, {"function": "m:f"}, damaged=True, uses=4),
           EntryInfo(key="k", size=3, created=1.5, accessed=None, meta={"function": "m:f"})]
assert ENTRIES[0] == ENTRIES[2]  # the same fields, given by position or by name
SUMMARIES = [FunctionSummary("m:f", "3.11", 2, 10, 5.0, 1.0),
             FunctionSummary("m:f", None, 2, 10, 5.0, 1.0, used=3.0, uses=7, damaged=True)]


@pytest.mark.parametrize("records", [ENTRIES, SUMMARIES], ids=["EntryInfo", "FunctionSummary"])
def test_store_records_behave_as_generated_frozen_dataclasses(records):
    cls = type(records[0])
    twin = _generated(cls, frozen=True)
    twins = [twin(**dataclasses.asdict(r)) for r in records]
    for a, ta in zip(records, twins, strict=True):
        assert repr(a) == repr(ta)
        assert dataclasses.astuple(a) == dataclasses.astuple(ta)
        assert pickle.loads(pickle.dumps(a)) == a
        for b, tb in zip(records, twins, strict=True):
            assert (a == b) == (ta == tb) and (a != b) == (ta != tb)
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.size = 0  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del a.size  # type: ignore[misc]
    assert records[0] != records[1]
    assert records[0] != twins[0]  # another class, as a generated __eq__ says
    changed = dataclasses.replace(records[0], size=99)
    assert type(changed) is cls and changed.size == 99 and records[0].size != 99
    assert cls.__match_args__ == tuple(f.name for f in dataclasses.fields(cls))


def test_store_records_hash_as_generated_ones_when_their_fields_hash():
    """A summary's fields are all hashable: its hash is the generated one's."""
    twin = _generated(FunctionSummary, frozen=True)
    for r in SUMMARIES:
        assert hash(r) == hash(twin(**dataclasses.asdict(r)))
        assert {r: 1}[dataclasses.replace(r)] == 1


def test_options_compare_and_show_as_before_and_hide_the_secret():
    """Options: equal by their fields, shown without the fields kept out of repr (the secret)."""
    a, b = Options.make(secret=b"s3cret", expire=3600), Options.make(secret=b"s3cret", expire=3600)
    assert a == b and a != Options.make(secret=b"s3cret") and a != Options.make(expire=3600)
    assert "s3cret" not in repr(a) and repr(a).startswith("Options(store=")
    twin = _generated(Options, frozen=True)
    assert repr(a) == repr(twin(**{f.name: getattr(a, f.name) for f in dataclasses.fields(a)}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.expire = 5  # type: ignore[misc]
    assert a.replace(expire=60.0) != a and a.replace(expire=60.0).expire == 60.0


def test_fingerprint_is_compared_by_identity_and_shown_by_its_fields():
    a, b = Fingerprint(b"d", {"code": "x"}), Fingerprint(b"d", {"code": "x"})
    assert a != b and a == a and hash(a) != hash(b)
    assert repr(a) == repr(_generated(Fingerprint, frozen=False)(b"d", {"code": "x"}))


def test_records_can_be_subclassed_as_frozen_dataclasses_can():
    """Still frozen dataclasses to ``dataclasses``: a frozen dataclass subclass adds fields, and
    a plain subclass sets attributes of its own (only the fields refuse assignment)."""
    for cls in (EntryInfo, FunctionSummary):
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]

    @dataclasses.dataclass(frozen=True)
    class Tagged(FunctionSummary):
        label: str = ""

    t = Tagged("m:f", "3.11", 1, 2, 3.0, 4.0, label="x")
    assert t.label == "x" and t == Tagged("m:f", "3.11", 1, 2, 3.0, 4.0, label="x")
    assert t != Tagged("m:f", "3.11", 1, 2, 3.0, 4.0, label="y")  # its field compared too
    with pytest.raises(TypeError, match="non-frozen"):
        @dataclasses.dataclass
        class Thawed(FunctionSummary):
            more: int = 0

    class Plain(EntryInfo):
        pass

    p = Plain("k", 1, 2.0, None, {})
    p.note = 1  # type: ignore[attr-defined]
    assert p.note == 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.key = "other"  # type: ignore[misc]


def test_a_nan_field_compares_as_in_the_running_pythons_dataclasses():
    """Generated ``__eq__`` compares a tuple before 3.13 (an identical NaN is equal) and field
    by field from 3.13 on (a NaN never is): the records do what this Python's would."""
    nan = float("nan")
    twin = _generated(FunctionSummary, frozen=True)
    ours = FunctionSummary("m:f", None, 1, 2, nan, 1.0)
    theirs = twin("m:f", None, 1, 2, nan, 1.0)
    assert (ours == dataclasses.replace(ours)) == (theirs == dataclasses.replace(theirs))
    assert (ours == ours) is True and (theirs == theirs) is True  # the same object


def test_options_take_their_fields_by_name_only_as_the_generated_init_did():
    """``Options(**fields)``: defaults (a new dict each time for a factory's), and a ``TypeError``
    naming an unknown field."""
    a, b = Options(), Options(expire=60.0)
    assert a.store_options == {} and a.store_options is not Options().store_options
    assert b.expire == 60.0 and a.expire is None and a == Options.make()
    with pytest.raises(TypeError, match="bogus"):
        Options(bogus=1)
    given = {"expire": 5.0}
    Options(**given)
    assert given == {"expire": 5.0}  # the caller's dict is left as it was


def test_importing_fncache_leaves_the_collector_as_it_found_it():
    """The import pauses the garbage collector (its objects live as long as the process) and
    turns it back on after, unless it was off before: in a new process."""
    script = ("import gc, sys\nif sys.argv[1] == 'off': gc.disable()\nimport fncache\n"
              "print(gc.isenabled())")
    for state, expected in (("on", "True"), ("off", "False")):
        out = subprocess.run([sys.executable, "-c", script, state], capture_output=True, text=True,
                             check=True).stdout.strip()
        assert out == expected
