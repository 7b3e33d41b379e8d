"""Code fingerprints: which edits change a function's key and which do not.

The scenario tests run the fixture project (``tests/fixtures_code``) in fresh interpreters that
write real files: version 1, version 2, version 1 again at the same path (so a "differs" verdict
is never luck: version 1 must give its old key back), and version 1 in a second checkout directory,
each with another ``PYTHONHASHSEED``. The rest are in-process tests of single rules.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

import fncache
from fncache.code.fingerprint import fingerprint
from fncache.values import hasher as _hasher

from .helpers import load_harness

harness = load_harness()

#: scenario -> what version 2 edits; each must change the scenario's key.
CHANGED = {
    "main_helper": "a helper in __main__",
    "main_constant": "a module constant read as a global",
    "default_arg": "a default value",
    "closure_add": "a closure variable",
    "decorator_code": "the code of a decorator's wrapper",
    "decorated_body": "the body of a decorated function",
    "decorator_arg": "a decorator factory's argument",
    "main_class_method": "a method of a __main__ class the function instantiates",
    "class_method": "a method of a class (in a local module) the function instantiates",
    "class_attr": "a class attribute of a class the function instantiates",
    "arg_method": "a method of an argument's class",
    "local_helper": "a helper in a local module",
    "helper_of_helper": "a helper of a helper",
    "module_constant": "a constant of a local module read by a helper",
    "attr_read": "an attribute read on a user module (settings.SCALE)",
    "package_helper": "a helper in a local package",
    "package_attr_chain": "a function read as mypkg.tools.clean",
    "data_dep": "the content of a depends_on file",
}
#: scenario -> why version 2 must keep its key.
KEPT = {
    "fmt_blank": "blank lines inside",
    "fmt_comments": "comments above and inside",
    "fmt_spaces": "whitespace",
    "fmt_wrapped": "a call split over lines",
    "fmt_docstring": "a changed docstring",
    "fmt_docstring_added": "an added docstring",
    "fmt_moved": "the function moved within its file",
    "control_main": "unrelated code in __main__ edited (and lines shifted)",
    "control_local": "unrelated code in the same local module edited",
    "control_attr": "another attribute of the same user module edited",
    "control_package": "another function of the same package module edited",
    "pinned": "version= pins the code part",
    "with_numpy": "nothing it reaches was edited",
}


@pytest.mark.slow
def test_every_scenario_is_classified(runs):
    """Each scenario of the fixture project is asserted on by one of the lists above."""
    assert set(runs["v1"]["keys"]) == set(CHANGED) | set(KEPT)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHANGED))
def test_edit_changes_the_key(runs, name):
    """Editing something the function reaches gives a new key; undoing the edit restores the old."""
    v1, v2, again = (runs[r]["keys"][name] for r in ("v1", "v2", "v1_again"))
    assert v1 != v2, f"{name}: editing {CHANGED[name]} kept the key"
    assert again == v1, f"{name}: version 1 at the same path gave another key the second time"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KEPT))
def test_edit_keeps_the_key(runs, name):
    """Formatting-only and unrelated edits keep the key."""
    v1, v2, again = (runs[r]["keys"][name] for r in ("v1", "v2", "v1_again"))
    assert v1 == v2 == again, f"{name}: {KEPT[name]} changed the key"


@pytest.mark.slow
def test_same_keys_in_two_checkout_directories(runs):
    """One tree copied to two directories, run with other hash seeds, gives the same keys."""
    a, b = runs["paths"]
    assert a != b
    assert runs["v1_elsewhere"]["keys"] == runs["v1"]["keys"]
    assert runs["v1_elsewhere"]["components"] == runs["v1"]["components"]


@pytest.mark.slow
def test_results_are_served_from_the_store_in_the_second_checkout(runs):
    """The second checkout's calls hit the entries the first one stored."""
    statuses = {n: e["status"] for n, e in runs["v1_elsewhere"]["explain"].items()}
    assert set(statuses.values()) == {"hit"}, statuses
    assert runs["v1_elsewhere"]["results"] == runs["v1"]["results"]


@pytest.mark.slow
def test_components_name_what_was_read(runs):
    """Components are labelled by what the code reads, relative to the function's own module."""
    comps = runs["v1"]["components"]
    assert "function scale_main" in comps["main_helper"]
    assert "global THRESHOLD" in comps["main_constant"]
    assert "function helpers._inner" in comps["helper_of_helper"]
    assert "global helpers.LIMIT" in comps["module_constant"]
    assert "attr settings.SCALE" in comps["attr_read"]
    assert "attr settings.OTHER" not in comps["attr_read"]  # only names the code uses
    assert "function mypkg.tools.clean" in comps["package_attr_chain"]
    assert "class shapes.Crate" in comps["class_attr"]
    assert "closure make_adder.<locals>.add.n" in comps["closure_add"]
    assert not any("BIG" in label for label in comps["control_main"])


@pytest.mark.slow
def test_track_versions_adds_the_versions_of_installed_distributions(runs):
    """track_versions=True adds one component per distribution reached (numpy here), by version."""
    np = pytest.importorskip("numpy")
    comps = runs["v1"]["components"]["with_numpy"]
    assert comps["version numpy"] == _hasher.digest(np.__version__).hex()
    untracked = runs["v1"]["components"]["main_helper"]
    assert not any(label.startswith("version ") for label in untracked)

    def total(x):
        return float(np.asarray(x).sum())

    assert "version numpy" not in fingerprint(total).components
    tracked = fncache.memoize(track_versions=True)(total)
    assert "version numpy" in tracked._fingerprint().components
    assert fncache.key_for(tracked, [1]) != fncache.key_for(total, [1])


# ---------------------------------------------------------------------------------------------
# In-process rules
# ---------------------------------------------------------------------------------------------

def _edit(module: types.ModuleType, source: str) -> None:
    """Run ``source`` in the module's namespace, as an edit reloaded by hand would."""
    # dont_inherit: not this file's ``from __future__`` flags, which are part of co_flags.
    exec(compile(source, "<edit>", "exec", dont_inherit=True), vars(module))


def _module(name: str, source: str, tmp_path: Path) -> types.ModuleType:
    """A user module made from source, registered in sys.modules under ``name``."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def modules(tmp_path):
    made: list[str] = []

    def make(name: str, source: str) -> types.ModuleType:
        made.append(name)
        return _module(name, source, tmp_path)

    yield make
    for name in made:
        sys.modules.pop(name, None)


def test_recursion_and_mutual_recursion_end(modules):
    """A function that calls itself, or two that call each other, fingerprint without looping."""
    m = modules("fp_recursion", (
        "def even(n):\n    return True if n == 0 else odd(n - 1)\n"
        "def odd(n):\n    return False if n == 0 else even(n - 1)\n"
        "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
    ))
    assert {"function even", "function odd"} <= set(fingerprint(m.even).components)
    assert fingerprint(m.fact).components.keys() == {"function fact", "global fact"}
    before = fingerprint(m.even).digest
    _edit(m, "def odd(n):\n    return n % 2 == 1\n")
    assert fingerprint(m.even).digest != before


def test_edit_in_place_is_seen_by_a_live_process(modules):
    """Rebinding a helper or a constant in a running process gives a new key at the next call."""
    m = modules("fp_live",
                "K = 1\ndef helper(x):\n    return x + K\ndef f(x):\n    return helper(x)\n")
    k1 = fncache.key_for(m.f, 1)
    m.K = 2
    k2 = fncache.key_for(m.f, 1)
    _edit(m, "def helper(x):\n    return x - K\n")
    k3 = fncache.key_for(m.f, 1)
    assert len({k1, k2, k3}) == 3
    m.K = 1
    _edit(m, "def helper(x):\n    return x + K\n")
    assert fncache.key_for(m.f, 1) == k1


def test_lru_cached_helper_is_followed_into(modules):
    """A helper wrapped by functools.lru_cache (pickled by name) is fingerprinted by its code."""
    src = ("import functools\n@functools.lru_cache\ndef h(x):\n    return x * {n}\n"
           "def f(x):\n    return h(x)\n")
    k1 = fncache.key_for(modules("fp_lru", src.format(n=2)).f, 1)
    k2 = fncache.key_for(modules("fp_lru", src.format(n=3)).f, 1)
    assert k1 != k2


def test_callable_objects_can_be_memoized(modules):
    """functools.partial of a user function is keyed by the function's code and the bound values."""
    m = modules("fp_partial", "def f(a, b):\n    return a + b\n")
    p1, p2 = functools.partial(m.f, 1), functools.partial(m.f, 2)
    assert fingerprint(p1).digest != fingerprint(p2).digest
    before = fingerprint(p1).digest
    _edit(m, "def f(a, b):\n    return a - b\n")
    assert fingerprint(functools.partial(m.f, 1)).digest != before


def test_library_code_is_taken_by_reference():
    """Functions and classes of installed or standard-library modules enter by name only."""
    import json

    fp = fingerprint(json.dumps)
    assert fp.components == {}
    assert fp.digest == fingerprint(json.dumps).digest


def test_track_and_untrack_switch_a_module_between_value_and_reference(modules):
    """untrack() makes a user module's code count by name; track() brings it back by value."""
    m = modules("fp_tracked", "def helper(x):\n    return x + 1\ndef f(x):\n    return helper(x)\n")
    assert "function helper" in fingerprint(m.f).components
    try:
        fncache.untrack("fp_tracked")
        fp = fingerprint(m.f)
        assert fp.components == {}
    finally:
        fncache.track("fp_tracked")
    assert "function helper" in fingerprint(m.f).components


def test_version_pins_the_code_part(modules):
    """version= keys by the string, not the code: different code, same version, same key."""
    a = modules("fp_pin", "def f(x):\n    return x + 1\n").f
    b = modules("fp_pin", "def f(x):\n    return x + 2\n").f
    assert a.__qualname__ == b.__qualname__
    assert fncache.key_for(fncache.memoize(version="v3")(a), 1) == \
        fncache.key_for(fncache.memoize(version="v3")(b), 1)
    assert fncache.key_for(fncache.memoize(version="v3")(a), 1) != \
        fncache.key_for(fncache.memoize(version="v4")(a), 1)
    assert fncache.key_for(a, 1) != fncache.key_for(b, 1)


def test_depends_on_a_file_counts_its_content(tmp_path):
    """A depends_on path counts by content: rewriting it changes the key, restoring restores it."""
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")

    def load(n):
        return n

    m = fncache.memoize(depends_on=[data])(load)
    k1 = m.key(1)
    data.write_text("a,b\n1,3\n")  # same size
    os.utime(data, ns=(1_000_000_000, 1_000_000_000))  # and a different mtime than before
    k2 = m.key(1)
    data.write_text("a,b\n1,2\n")
    k3 = m.key(1)
    assert k1 != k2 and k1 == k3
    assert k1 != fncache.key_for(load, 1)


def test_depends_on_a_directory_and_on_values(tmp_path):
    """A directory counts every file below it; any other object counts by value."""
    d = tmp_path / "tables"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "t.txt").write_text("x")

    def f(n):
        return n

    k1 = fncache.memoize(depends_on=[d, {"schema": 1}])(f).key(1)
    (d / "sub" / "u.txt").write_text("y")
    k2 = fncache.memoize(depends_on=[d, {"schema": 1}])(f).key(1)
    k3 = fncache.memoize(depends_on=[d, {"schema": 2}])(f).key(1)
    assert len({k1, k2, k3}) == 3


# Line layouts that compile to different bytecode on 3.12+ (a NOP holding a line, 3.13's fused
# local loads and stores), and edits that look alike but change what runs.
_SAME_CODE = [
    ("def f(a, b):\n    return max(a, b, 3)\n",
     "def f(a, b):\n    return max(\n        a,\n        b,\n        3,\n    )\n"),
    ("def f(a, b):\n    try: x, y = a, b\n    except E: return 0\n    return x + y\n",
     "def f(a, b):\n    try:\n        x, y = (a,\n                b)\n    except E:\n        return 0\n"
     "    return (x\n            + y)\n"),
    ("def f(d):\n    match d:\n        case {'k': v}: return v\n        case _: return None\n",
     "def f(d):\n    match d:\n        case {\n            'k': v\n        }:\n            return v\n"
     "        case _:\n            return None\n"),
    ("def f(a, b):\n    if a and b: return 1\n    return 2\n",
     "def f(a, b):\n    if (a\n        and b):\n        return 1\n    return 2\n"),
]
_TRY = "def f(a, b):\n    try:\n        x = a / b\n    except ZeroDivisionError:\n        x = 0\n"
_OTHER_CODE = [
    ("def f(a, b):\n    x, y = a, b\n    return x - y\n",
     "def f(a, b):\n    x, y = b, a\n    return x - y\n"),
    ("def f(a, b):\n    return a - b\n", "def f(a, b):\n    return b - a\n"),
    ("def f(a, b):\n    if a and b: return 1\n    return 2\n",
     "def f(a, b):\n    if a or b: return 1\n    return 2\n"),
    (_TRY + "    return x + 1\n", _TRY + "        return x + 1\n    return x + 1\n"),
    ("def f(a, b):\n    while a < b:\n        a += 1\n    return a\n",
     "def f(a, b):\n    if a < b:\n        a += 1\n    return a\n"),
]


def _code_of(source):
    ns = {}
    exec(source, ns)
    return ns["f"].__code__


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 keys co_code as it always was: a line "
                    "held by a NOP there still changes a key (a needless miss, never a stale hit)")
@pytest.mark.parametrize(("a", "b"), _SAME_CODE)
def test_line_layout_does_not_change_the_code_digest(a, b):
    """A statement split over lines, a ``try:`` on its own line: one digest (3.12+)."""
    from fncache.code.digest import code_digest

    assert code_digest(_code_of(a)) == code_digest(_code_of(b))


@pytest.mark.parametrize(("a", "b"), _OTHER_CODE)
def test_edits_that_change_what_runs_change_the_code_digest(a, b):
    """Swapped fused loads, another jump target or exception range: another digest."""
    from fncache.code.digest import code_digest

    assert code_digest(_code_of(a)) != code_digest(_code_of(b))
