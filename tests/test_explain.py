"""Explaining misses: what differs between a call (or the current code) and stored entries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import fncache
from fncache._callkey import PYTHON
from fncache._explain import (
    Difference,
    Explanation,
    FunctionExplanation,
    explain_call,
    explain_function,
    format_explanation,
)
from fncache.stores.memory import MemoryStore

from .helpers import import_source, load_harness, run_py, write

harness = load_harness()

#: What explain() says for each scenario of the fixture project once version 2 is in place.
REASONS = {
    "main_helper": ["helper `scale_main` changed"],
    "main_constant": ["global `THRESHOLD` changed: 0.5 -> 0.6"],
    "default_arg": ["function `default_arg` (its code, defaults or decorators) changed",
                    "argument `k` changed"],
    "closure_add": ["closure variable `n` of `make_adder.<locals>.add` changed"],
    "decorator_code": ["function `decorator_code` (its code, defaults or decorators) changed"],
    "decorated_body": ["function `decorated_body` (its code, defaults or decorators) changed"],
    "decorator_arg": ["closure variable `factor` of `decorator_arg` changed"],
    "main_class_method": ["method `Local.rate` changed"],
    "class_method": ["method `shapes.Box.area` changed"],
    "class_attr": ["class `shapes.Crate` (attributes, bases or metaclass) changed"],
    "arg_method": ["argument `shape` changed"],
    "local_helper": ["helper `helpers.normalize` changed"],
    "helper_of_helper": ["helper `helpers._inner` changed"],
    "module_constant": ["global `helpers.LIMIT` changed: 10 -> 11"],
    "attr_read": ["attribute `settings.SCALE` changed"],
    "package_helper": ["helper `mypkg.core.compute` changed"],
    "package_attr_chain": ["helper `mypkg.tools.clean` changed"],
    "data_dep": ["a `depends_on` input changed"],
}


@pytest.mark.slow
def test_first_run_explains_new_functions(runs):
    """Before anything is stored, every call is a miss of a new function."""
    assert {e["status"] for e in runs["v1"]["explain"].values()} == {"new function"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REASONS))
def test_miss_after_an_edit_names_the_edit(runs, name):
    """After version 2's edit, the call misses and explain names exactly what was edited."""
    e = runs["v2"]["explain"][name]
    assert e["status"] == "miss"
    assert e["reasons"] == REASONS[name]
    assert e["nearest"] == runs["v1"]["keys"][name]  # the entry version 1 stored
    assert all(d["old"] != d["new"] for d in e["differences"])


@pytest.mark.slow
def test_unaffected_calls_are_hits(runs):
    """Calls whose key version 2 kept are explained as hits; back at version 1, all are."""
    kept = set(runs["v2"]["keys"]) - set(REASONS)
    assert {runs["v2"]["explain"][n]["status"] for n in kept} == {"hit"}
    assert {e["status"] for e in runs["v1_again"]["explain"].values()} == {"hit"}


# ---------------------------------------------------------------------------------------------
# In process
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def store():
    return MemoryStore("memory://explain-tests")




def test_explain_call_returns_structured_data(store):
    """status, key, nearest entry and differences with kind, name, old and new digests."""
    scale = {"k": 2}

    def helper(x):
        return x * scale["k"]

    def f(x, y=1):
        return helper(x) + y

    m = fncache.memoize(store=store)(f)
    first = m.explain(1)
    assert isinstance(first, Explanation) and first.status == "new function" and not first.hit
    assert first.key == m.key(1)
    m(1)
    assert m.explain(1).hit
    scale["k"] = 3
    e = m.explain(1, y=2)
    assert e.status == "miss" and e.entries == 1 and e.nearest is not None
    kinds = {(d.kind, d.name, d.change) for d in e.differences}
    assert kinds == {("closure", f"{helper.__qualname__}.scale", "changed"),
                     ("argument", "y", "changed")}
    for d in e.differences:
        assert len(d.old) == len(d.new) == 32
    text = str(e)
    assert text.startswith(f"{m.function_id} [{e.key[:12]}]: miss; nearest of 1 entry")
    assert "  - argument `y` changed" in text
    assert e.as_dict()["reasons"] == [str(d) for d in e.differences]
    assert format_explanation(e) == text


def test_nearest_entry_is_the_one_with_fewest_differences(store):
    """Among several entries, a miss is explained against the closest one."""
    def f(a, b, c):
        return a + b + c

    m = fncache.memoize(store=store)(f)
    m(1, 1, 1)
    m(1, 2, 2)
    e = m.explain(1, 2, 3)
    assert e.entries == 2
    assert e.nearest == m.key(1, 2, 2)
    assert [str(d) for d in e.differences] == ["argument `c` changed"]


def test_helpers_added_and_removed_are_named(store, tmp_path):
    """A helper the new code no longer reaches, or reaches for the first time, is named as such."""
    src = "def a(x):\n    return x\ndef b(x):\n    return -x\ndef f(x):\n    return {h}(x)\n"
    old = fncache.memoize(store=store)(import_source("ex_added", src.format(h="a"), tmp_path).f)
    old(1)
    new = fncache.memoize(store=store)(import_source("ex_added", src.format(h="b"), tmp_path).f)
    reasons = [str(d) for d in new.explain(1).differences]
    assert "helper `a` is no longer used" in reasons
    assert "helper `b` is new (not in the stored entry)" in reasons
    assert "function `f` (its code, defaults or decorators) changed" in reasons


def test_pinned_version_change_is_named(store):
    """A changed version= pin is reported with both values."""
    def f(x):
        return x

    fncache.memoize(store=store, version="v1")(f)(1)
    e = fncache.memoize(store=store, version="v2")(f).explain(1)
    assert [str(d) for d in e.differences] == ["pinned version changed (v1 -> v2)"]
    assert e.differences[0] == Difference("version", "version", "v1", "v2")


def test_library_version_change_is_named(store):
    """With track_versions, a distribution whose version moved is named."""
    np = pytest.importorskip("numpy")

    def total(x):
        return float(np.asarray(x).sum())

    m = fncache.memoize(store=store, track_versions=True)(total)
    key = m.key([1])
    comps = dict(m._fingerprint().components, **{"version numpy": "0" * 32})
    store.add(key[::-1], b"x", {"function": m.function_id, "created": 1.0, "python": PYTHON,
                                "components": comps, "args": {}})
    e = m.explain([1])
    assert [str(d) for d in e.differences if d.kind != "argument"] == [
        "version of `numpy` changed"]


def test_entry_of_another_python_is_named_as_such(store):
    """An entry another interpreter wrote is explained by its Python version alone (its components
    all differ, bytecode being per version), and an entry of this Python is preferred as nearest."""
    def helper(x):
        return x + 1

    def f(x):
        return helper(x)

    m = fncache.memoize(store=store)(f)
    m(1)
    entry = next(e for e in m.store.entries() if e.function == m.function_id)
    meta = dict(entry.meta, python="3.10",
                components={label: "0" * 32 for label in entry.meta["components"]})
    m.store.delete(entry.key)
    m.store.add("f" * 32, b"x", meta)
    e = m.explain(1)
    assert e.status == "miss"
    assert [str(d) for d in e.differences] == [
        f"written by Python 3.10 (this is Python {sys.version_info[0]}.{sys.version_info[1]}): keys "
        "include the interpreter's version, so a Python upgrade starts the cache afresh"]
    m(2)  # an entry of this interpreter, with another argument
    e = m.explain(1)
    assert [d.kind for d in e.differences] == ["argument"] and e.nearest == m.key(2)


def test_explain_function_for_a_memoized_object(store):
    """Entries are grouped by code version: the current one is marked, others say what differs."""
    limit = [10]

    def f(x):
        return min(x, limit[0])

    m = fncache.memoize(store=store)(f)
    assert explain_function(store, m).status == "new function"
    m(1)
    m(2)
    limit[0] = 11
    m(3)
    r = explain_function(store, m)
    assert isinstance(r, FunctionExplanation)
    assert (r.status, r.entries, len(r.versions)) == ("current", 3, 2)
    current = [v for v in r.versions if v.current]
    stale = [v for v in r.versions if not v.current]
    assert [v.entries for v in current] == [1] and [v.entries for v in stale] == [2]
    reason = f"closure variable `limit` of `{f.__qualname__}` changed"
    assert [str(d) for d in stale[0].differences] == [reason]
    assert "current code" in str(r) and reason in str(r)
    assert r.as_dict()["versions"][0]["entries"] in (1, 2)


def test_explain_function_by_module_name(store, tmp_path):
    """MODULE:QUALNAME imports the module; a module that cannot be imported still lists versions."""
    src = "import fncache\nT = {t}\n@fncache.memoize\ndef g(x):\n    return x > T\n"
    mod = import_source("ex_bymodule", src.format(t=1), tmp_path)
    fncache.memoize(store=store)(mod.g.__wrapped__)(5)
    mod = import_source("ex_bymodule", src.format(t=2), tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        r = explain_function(store, "ex_bymodule:g")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ex_bymodule", None)
    assert r.status == "stale" and r.function == "ex_bymodule:g"
    assert [str(d) for d in r.versions[0].differences] == ["global `T` changed: 1 -> 2"]
    gone = explain_function(store, "ex_bymodule:g")  # no longer importable
    assert gone.status == "unknown" and "no module named 'ex_bymodule'" in (gone.error or "")
    assert gone.entries == 1 and gone.versions[0].differences == []


@pytest.mark.slow
def test_explain_function_for_a_script(tmp_path):
    """SCRIPT.py:QUALNAME runs the script (not as __main__) and compares the entries its runs
    recorded (under the script's name)."""
    script = tmp_path / "job.py"
    src = ("import fncache\nimport sys\ndef helper(x):\n    return x + {n}\n"
           "@fncache.memoize(store=sys.argv[1])\ndef f(x):\n    return helper(x)\n"
           "if __name__ == '__main__':\n    f(1)\n    print('ran')\n")
    cache = tmp_path / "cache"
    script.write_text(src.format(n=1))
    env = harness.child_env(cache)
    subprocess.run([sys.executable, str(script), str(cache)], check=True, env=env, timeout=60,
                   capture_output=True)
    disk = fncache.open_store(cache)
    saved_argv = sys.argv
    sys.argv = [str(script), str(cache)]
    try:
        assert explain_function(disk, f"{script}:f").status == "current"
        script.write_text(src.format(n=2))
        r = explain_function(disk, f"{script}:f")
    finally:
        sys.argv = saved_argv
    assert r.function == "job:f" and r.status == "stale"
    assert [str(d) for d in r.versions[0].differences] == ["helper `helper` changed"]


def test_explain_call_needs_a_hashable_call(store):
    """Explaining a call that cannot be keyed raises what the call would raise."""
    m = fncache.memoize(store=store)(lambda x: x)
    import threading

    with pytest.raises(fncache.UnhashableArgument):
        explain_call(m, (threading.Lock(),), {})


def test_explain_survives_poisoned_metadata(tmp_path):
    """Metadata of the wrong types planted in the store never crashes explain; the call is still explained."""
    store = fncache.open_store(f"memory://poisoned-{tmp_path.name}")

    @fncache.memoize(store=store)
    def f(x):
        return x + 1

    f(1)
    for i, meta in enumerate([{"function": f.function_id, "components": {"a": [1], 3: "x"}, "args": [1]},
                              {"function": f.function_id, "components": "nope", "python": 3,
                               "version": {"v": 1}, "depends_on": [2]}]):
        store.add(f"{i:032x}", b"junk", meta)
    report = f.explain(2)
    assert report.status != "hit" and "x" in str(report)


# ---------------------------------------------------------------------------------------------
# The change itself: sources kept in the store, diffs and values
# ---------------------------------------------------------------------------------------------

_JOB = '''
import sys

import fncache

THRESHOLD = {threshold}
TABLE = list(range(1000))


def helper(x):
    {comment}return x * {factor}


@fncache.memoize(store=sys.argv[1] if len(sys.argv) > 1 else "cache")
def step(x):
    return helper(x) + THRESHOLD + len(TABLE)


if __name__ == "__main__":
    print(step(3), step(4))
'''


def _job(tmp_path, threshold="0.5", factor="2", comment="", table="list(range(1000))"):
    source = _JOB.format(threshold=threshold, factor=factor, comment=comment)
    (tmp_path / "job.py").write_text(source.replace("list(range(1000))", table))


def _explain_in_new_process(tmp_path):
    api = run_py(tmp_path / "explain_api.py", cwd=tmp_path).stdout
    cli = subprocess.run([sys.executable, "-m", "fncache", "explain", "job:step", "--dir", "cache"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    return api, cli.stdout


@pytest.mark.slow
def test_explain_shows_the_changed_lines_from_a_new_process_after_the_old_file_is_gone(tmp_path):
    """v1 runs; the file is rewritten as v2 (v1's text exists only in the store); a new process's
    explain (API and CLI) shows the helper's old and new lines and the constant's two values."""
    write(tmp_path / "explain_api.py", "import job\nprint(job.step.explain(3))\n")
    _job(tmp_path)
    run_py(tmp_path / "job.py", "cache", cwd=tmp_path)
    _job(tmp_path, threshold="0.7", factor="3")
    api, cli = _explain_in_new_process(tmp_path)
    for text in (api, cli):
        assert "helper `helper` changed" in text
        assert "-    return x * 2" in text and "+    return x * 3" in text
        assert "global `THRESHOLD` changed: 0.5 -> 0.7" in text
        assert "def helper(x):" in text  # a line of context names where the change is
    # One copy of each function's source for the two entries of v1 (content-addressed).
    data = json.loads(subprocess.run([sys.executable, "-m", "fncache", "info", "--dir", "cache",
                                      "--json"], cwd=tmp_path, capture_output=True, text=True,
                                     timeout=120).stdout)
    assert data["entries"] == 2 and data["sources"] == 2  # step and helper


@pytest.mark.slow
def test_a_comment_only_edit_shows_no_diff_and_a_long_value_its_type(tmp_path):
    """A comment-only edit keeps the key (a hit, nothing to show); a long global is shown by type
    and digest, never by a repr of its content."""
    write(tmp_path / "explain_api.py", "import job\nprint(job.step.explain(3))\n")
    _job(tmp_path)
    run_py(tmp_path / "job.py", "cache", cwd=tmp_path)
    _job(tmp_path, comment="# doubles x\n    ")
    api, _ = _explain_in_new_process(tmp_path)
    assert ": hit" in api and "return x" not in api
    _job(tmp_path, table="list(range(1001))")
    api, _ = _explain_in_new_process(tmp_path)
    assert "global `TABLE` changed: builtins.list [" in api and "-> builtins.list [" in api
    assert "999" not in api


def test_a_planted_or_missing_source_is_never_shown(tmp_path):
    """A source whose text does not hash to its address (planted, damaged) is not shown: the
    change is still named, without lines. A symlink in place of the sources folder is never
    followed, for writing or reading."""
    import os
    from pathlib import Path

    store = str(tmp_path / "cache")
    src = "def f(x):\n    return x + {}\n"
    m = fncache.memoize(store=store)(_compiled(src.format(1), {}))
    m(1)
    entry = next(iter(m.store.entries()))
    key = entry.meta["sources"]["function " + m.function_id.rpartition(":")[2]]
    kept = Path(store) / "sources" / f"{key}.src"
    assert kept.read_text() == src.format(1)
    kept.write_text("def f(x):\n    return 'planted'\n")
    new = fncache.memoize(store=store)(_compiled(src.format(2), {}))
    diffs = new.explain(1).differences
    assert [d.kind for d in diffs if d.kind != "argument"] == ["function"]
    assert all(not d.diff for d in diffs) and "planted" not in str(new.explain(1))
    kept.write_text(src.format(1))
    assert any(d.diff for d in new.explain(1).differences)  # the genuine text is shown again
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{key}.src").write_text(src.format(1))
    os.rename(Path(store) / "sources", tmp_path / "moved")
    os.symlink(outside, Path(store) / "sources")
    assert all(not d.diff for d in new.explain(1).differences)
    new(1)  # stores an entry: its sources are not written through the link
    assert [p.name for p in outside.iterdir()] == [f"{key}.src"]


def _compiled(source, scope):
    import linecache

    name = f"<explain-test-{len(linecache.cache)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), scope)
    return scope["f"]


@pytest.mark.slow
def test_clear_and_prune_remove_the_sources_no_entry_needs(tmp_path):
    """Sources are kept per function version; clearing a function's entries removes its sources,
    leaving those that other entries still use."""
    _job(tmp_path)
    run_py(tmp_path / "job.py", "cache", cwd=tmp_path)
    _job(tmp_path, factor="3")
    run_py(tmp_path / "job.py", "cache", cwd=tmp_path)  # a second version of helper

    def info():
        out = subprocess.run([sys.executable, "-m", "fncache", "info", "--dir", "cache", "--json"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    assert info()["sources"] == 3  # step once, helper twice
    done = subprocess.run([sys.executable, "-m", "fncache", "clear", "--dir", "cache", "--function",
                           "job:step", "--yes"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert info()["sources"] == 0 and info()["entries"] == 0


@pytest.mark.parametrize("kind", ["disk", "memory", "tiered"])
def test_stores_keep_sources_apart_from_their_entries(kind, tmp_path):
    """put/get/sizes/delete of kept sources: idempotent, never an entry, gone with clear()."""
    from fncache.stores import open_store

    url = {"disk": str(tmp_path / "d"), "memory": "memory://",
           "tiered": f"{tmp_path / 'near'},{tmp_path / 'far'}"}[kind]
    store = open_store(url)
    assert store.keeps_sources
    a, b = "a" * 32, "b" * 32
    store.put_source(a, b"def f(): pass\n")
    store.put_source(a, b"def f(): pass\n")
    store.put_source(b, b"x")
    assert store.get_source(a) == b"def f(): pass\n" and store.get_source("c" * 32) is None
    assert store.source_sizes() == {a: 14, b: 1}
    assert len(store) == 0 and list(store.listing()) == []
    assert store.delete_sources([a, "c" * 32]) == 1 and store.source_sizes() == {b: 1}
    if kind != "memory":  # a file name is an address, nothing else
        with pytest.raises(ValueError):
            store.put_source("../escape", b"x")
        assert not (tmp_path / "escape").exists()


def test_explain_of_a_method_through_its_instance_says_how_to_call_it(store):
    """``obj.f.explain(x)`` reaches the memoized function without ``obj``: the error names the
    way that works, which explains the call."""
    class Model:
        @fncache.memoize(store=store)
        def fit(self, x):
            return x

    with pytest.raises(TypeError, match=r"call explain through the class with the instance first: "
                                        r".*Model.fit.explain\(obj, \.\.\.\)$") as found:
        Model().fit.explain(1)
    assert str(found.value).count("for a method") == 1  # one hint, naming explain
    assert Model.fit.explain(Model(), 1).status


@pytest.mark.parametrize("what", ["key", "call_key", "call", "check_call_in_cache"])
def test_other_methods_through_an_instance_say_how_to_call_them(store, what):
    """``obj.f.key(x)`` and the like reach the memoized function without ``obj``, as ``explain``
    does: the error names the call that works, which gives the key of ``obj.f(x)``."""
    class Model:
        @fncache.memoize(store=store)
        def fit(self, x):
            return x

    model = Model()
    hint = rf"call {what} through the class .*: .*Model.fit.{what}\(obj, \.\.\.\)$"
    with pytest.raises(TypeError, match=hint):
        getattr(model.fit, what)(1)
    getattr(Model.fit, what)(model, 1)
    assert Model.fit.key(model, 1) == fncache.key_for(Model.fit, model, 1)
