"""Which code is the user's, and which installed distribution owns a library module (its version
enters the keys of library functions)."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import subprocess
import sys
import textwrap

from fncache.code import usercode
from fncache.code.distributions import distribution_versions
from tests.helpers import fake_distribution


def test_owners_agree_with_the_full_scan_for_every_installed_module():
    """Looking only where a module is imported from finds the distributions the full scan of every
    installed distribution finds, with the same versions."""
    everything = md.packages_distributions()
    checked = 0
    for top, names in everything.items():
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        expected = tuple(sorted({(n, md.version(n)) for n in names}))
        assert distribution_versions([top]) == expected, top
        checked += 1
    assert checked > 10


def test_names_and_versions_read_from_metadata_headers_are_importlib_metadatas(tmp_path):
    """The owner's name and version, read from its METADATA header, are what importlib.metadata
    reads, for every installed distribution; a header the quick reader leaves alone (a folded
    Version, a field name with a space), carriage returns and a PKG-INFO still give
    importlib.metadata's answer."""
    import pathlib

    from fncache.code.distributions import _name_and_version, _versions_of

    checked = 0
    for dist in md.distributions():
        path = getattr(dist, "_path", None)
        if path is None or not os.path.isdir(path):
            continue
        meta = md.PathDistribution(pathlib.Path(path)).metadata
        found = _name_and_version(str(path))
        assert found is None or found == (meta["Name"], meta["Version"]), path
        checked += found is not None
    assert checked > 10
    odd = {
        "folded.dist-info": ("METADATA", "Metadata-Version: 2.1\nName: folded\nVersion: 1.0\n"
                                         " .post1\n\nbody\n"),
        "crlf.dist-info": ("METADATA", "Metadata-Version: 2.1\r\nName: crlf\r\n"
                                       "Version: 2.0\r\n\r\n"),
        "spaced.dist-info": ("METADATA", "Metadata-Version: 2.1\nName : spaced\n"
                                         "Version: 4.0\n"),
        "old.egg-info": ("PKG-INFO", "Metadata-Version: 1.0\nName: old\nVersion: 3.0  \n"
                                     "License: a\n  long one\n"),
    }
    for name, (file, text) in odd.items():
        (tmp_path / name).mkdir()
        with open(tmp_path / name / file, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        meta = md.PathDistribution(tmp_path / name).metadata
        name_version = meta.get("Name"), meta.get("Version")
        expected = [name_version] if all(name_version) else None
        assert _versions_of((str(tmp_path / name),)) == expected, name
    assert _name_and_version(str(tmp_path / "old.egg-info")) == ("old", "3.0  ")
    for name in ("folded.dist-info", "spaced.dist-info"):
        assert _name_and_version(str(tmp_path / name)) is None, name
    assert _name_and_version(str(tmp_path / "crlf.dist-info")) == ("crlf", "2.0")  # read as text
    # A METADATA importlib.metadata cannot read is never passed over for an older PKG-INFO.
    bad = tmp_path / "bad.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_bytes(b"Name: x\nVersion: 1.0\nSummary: \xff\n")
    (bad / "PKG-INFO").write_text("Name: x\nVersion: 0.9\n")
    assert _name_and_version(str(bad)) is None


def test_standard_library_and_builtin_modules_have_no_distribution():
    assert distribution_versions(["json", "math", "sys", "_thread", "collections"]) == ()


_KEY_SCRIPT = textwrap.dedent("""
    import importlib.metadata as md
    def refuse():
        raise AssertionError("scanned every distribution")
    md.packages_distributions = refuse
    import fncache, fakelib
    fncache.untrack("fakelib")
    m = fncache.memoize(store="memory://", track_versions=True)(fakelib.f)
    print(m.key(1), sorted(m.call_key(1).components))
""")


def _fake_library(root, version: str) -> None:
    pkg = root / "fakelib"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("def f(x):\n    return x\n")
    fake_distribution(root, "fakelib", version,
                      f"fakelib/__init__.py,,\nfakelib-{version}.dist-info/METADATA,,\n")


def _key(root) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-c", _KEY_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_library_upgrade_changes_its_functions_keys_without_a_full_scan(tmp_path):
    """A new process keys a library function by its distribution's version, found from the module's
    own directory (the full scan is never run); upgrading the library changes the key."""
    _fake_library(tmp_path, "1.0")
    first = _key(tmp_path)
    assert "version fakelib" in first
    assert _key(tmp_path) == first
    _fake_library(tmp_path, "2.0")
    assert _key(tmp_path) != first
    _fake_library(tmp_path, "1.0")
    assert _key(tmp_path) == first


# -- owners remembered across processes --------------------------------------------------------

_OWNERS_SCRIPT = textwrap.dedent("""
    import json, os, sys
    site = os.path.realpath(sys.argv[1])
    opened = []
    def hook(event, args):
        if event == "open" and isinstance(args[0], str) and args[0].startswith(site) \\
                and os.path.basename(args[0]) in ("RECORD", "top_level.txt"):
            opened.append(os.path.relpath(args[0], site))
    sys.addaudithook(hook)
    from fncache.code.distributions import distribution_versions
    print(json.dumps([distribution_versions([sys.argv[2]]), sorted(opened)]))
""")


def _owners_in_new_process(site, cache, top: str, **env_vars: str):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), **env_vars)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-c", _OWNERS_SCRIPT, str(site), top], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import json

    versions, opened = json.loads(out.stdout)
    return [tuple(v) for v in versions], opened


def _owned_site(tmp_path):
    site = tmp_path / "site"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text("X = 1\n")
    fake_distribution(site, "fakelib", "1.0", "fakelib/__init__.py,,\n")
    fake_distribution(site, "other", "3.0", "other/__init__.py,,\n", top_level="other\n")
    return site


def test_a_new_process_reads_no_distribution_record_while_none_changed(tmp_path):
    """The owners of a directory's modules are remembered across processes: the second process
    finds the same owner with no RECORD or top_level.txt read; a new version is still seen (its
    version is read from its metadata every time)."""
    site, cache = _owned_site(tmp_path), tmp_path / "cache"
    first, opened = _owners_in_new_process(site, cache, "fakelib")
    assert first == [("fakelib", "1.0")]
    assert "fakelib-1.0.dist-info/RECORD" in opened
    again, opened = _owners_in_new_process(site, cache, "fakelib")
    assert (again, opened) == (first, [])
    remembered = list((cache / "fncache-distributions").iterdir())
    assert len(remembered) == 1 and remembered[0].stat().st_mode & 0o077 == 0
    fake_distribution(site, "fakelib", "2.0", "fakelib/__init__.py,,\n")
    upgraded, opened = _owners_in_new_process(site, cache, "fakelib")
    assert upgraded == [("fakelib", "2.0")]
    assert "fakelib-2.0.dist-info/RECORD" in opened
    assert all(p.startswith("fakelib-2.0.dist-info/") for p in opened)  # only the new one is read


def test_a_changed_metadata_file_is_read_again(tmp_path):
    """An edit of a remembered distribution's files (in place, same inode; a new top_level.txt)
    is seen by the next process: the memory never answers for files that changed."""
    site, cache = _owned_site(tmp_path), tmp_path / "cache"
    assert _owners_in_new_process(site, cache, "fakelib")[0] == [("fakelib", "1.0")]
    with open(site / "other-3.0.dist-info" / "top_level.txt", "a") as f:
        f.write("fakelib\n")  # other now provides fakelib too
    owners, opened = _owners_in_new_process(site, cache, "fakelib")
    assert owners == [("fakelib", "1.0"), ("other", "3.0")]
    assert opened == ["other-3.0.dist-info/top_level.txt"]
    (site / "other-3.0.dist-info" / "top_level.txt").unlink()  # falls back to its RECORD
    assert _owners_in_new_process(site, cache, "fakelib")[0] == [("fakelib", "1.0")]


def test_a_record_edited_in_place_is_read_again_where_it_names_the_modules(tmp_path):
    """RECORD is signed (and read again when it changes) only for a distribution whose modules it
    names: one with a top_level.txt naming them is checked by that file alone."""
    site, cache = _owned_site(tmp_path), tmp_path / "cache"
    fake_distribution(site, "plain", "1.0", "plain/__init__.py,,\n")
    assert _owners_in_new_process(site, cache, "fakelib")[0] == [("fakelib", "1.0")]
    with open(site / "other-3.0.dist-info" / "RECORD", "a") as f:
        f.write("fakelib/extra.py,,\n")  # its top_level.txt still names "other" only
    with open(site / "plain-1.0.dist-info" / "RECORD", "a") as f:
        f.write("fakelib/more.py,,\n")  # plain now ships a file of fakelib
    owners, opened = _owners_in_new_process(site, cache, "fakelib")
    assert owners == [("fakelib", "1.0"), ("plain", "1.0")]
    assert opened == ["plain-1.0.dist-info/RECORD", "plain-1.0.dist-info/top_level.txt"]
    assert _owners_in_new_process(site, cache, "fakelib") == (owners, [])


def test_a_damaged_or_foreign_memory_file_is_ignored(tmp_path):
    """Whatever the remembered file holds, if it is not this version's record for this directory
    (or names files as they are not), the owners are found by reading the metadata."""
    site, cache = _owned_site(tmp_path), tmp_path / "cache"
    expected = _owners_in_new_process(site, cache, "fakelib")[0]
    (memo,) = (cache / "fncache-distributions").iterdir()
    import json

    good = json.loads(memo.read_text())
    wrong_sig = dict(good, entries={n: [[None, None], []] for n in good["entries"]})
    unread = dict(good, entries={n: [[None, "-"], []] for n in good["entries"]})
    for planted in ("not json", "[]", json.dumps(dict(good, format=0)), json.dumps(unread),
                    json.dumps(dict(good, directory="/elsewhere")), json.dumps(wrong_sig),
                    json.dumps(dict(good, entries={n: "x" for n in good["entries"]}))):
        memo.write_text(planted)
        owners, opened = _owners_in_new_process(site, cache, "fakelib")
        assert owners == expected, planted
        assert "fakelib-1.0.dist-info/RECORD" in opened, planted


def test_owners_without_a_writable_or_wanted_memory(tmp_path):
    """A cache directory that cannot be written, or ``FNCACHE_DISTRIBUTIONS_CACHE=0``: the same
    owners, found by reading the metadata each time, and no file written."""
    site = _owned_site(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    for cache, env in ((blocked, {}), (tmp_path / "off", {"FNCACHE_DISTRIBUTIONS_CACHE": "0"})):
        for _ in range(2):
            owners, opened = _owners_in_new_process(site, cache, "fakelib", **env)
            assert owners == [("fakelib", "1.0")]
            assert "fakelib-1.0.dist-info/RECORD" in opened
    assert not (tmp_path / "off").exists()


def test_remembered_files_of_vanished_directories_are_removed_past_64(tmp_path, monkeypatch):
    """The remembered files do not pile up, one per environment ever used: past 64, a write
    removes those whose directory is gone (and unreadable ones), and keeps every other."""
    import json
    import shutil

    from fncache.code import distributions

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    memos = tmp_path / "cache" / "fncache-distributions"

    def site(i: int) -> str:
        d = tmp_path / f"site{i}"
        d.mkdir()
        fake_distribution(d, f"lib{i}", "1.0", f"lib{i}/__init__.py,,\n")
        assert distributions._read_directory(str(d)) != {}
        return str(d)

    def remembered() -> set[str]:
        return {json.loads(p.read_text())["directory"] for p in memos.iterdir()}

    sites = [site(i) for i in range(70)]
    assert remembered() == set(sites)  # all still there: none removed past 64
    for gone in sites[:60]:
        shutil.rmtree(gone)
    (memos / "damaged.json").write_text("not json")
    newer = site(70)
    assert remembered() == {*sites[60:], newer}
    shutil.rmtree(sites[60])
    newest = site(71)  # 12 files: under the limit, nothing is removed
    assert remembered() == {*sites[60:], newer, newest}


def test_a_class_whose_module_is_not_text_is_library_code():
    """A compiled metatype's class (Cython's shared types) reads ``__module__`` as a descriptor:
    it is not the user's code, and asking does not fail."""

    class Meta(type):
        __module__ = property(lambda cls: 42)  # type: ignore[assignment]

    odd = Meta("Odd", (), {})
    assert not isinstance(odd.__module__, str)
    assert usercode.is_user_code(odd) is False


def test_a_class_naming_a_library_module_is_judged_by_its_own_body(tmp_path, monkeypatch):
    """A class statement in a user's file with ``__module__ = "json"`` is user code (its methods
    are compiled from that file), unless its module is untracked; library classes, namedtuples
    a library made and classes whose only functions were made from strings stay library code."""
    import collections
    import json

    import fncache

    write_module = tmp_path / "lookalike.py"
    write_module.write_text(textwrap.dedent("""
        class K:
            __module__ = "json"

            def run(self, x):
                return x + 1
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from lookalike import K  # type: ignore[import-not-found]

    assert usercode.is_user_code(K)
    try:
        fncache.untrack("lookalike")
        assert not usercode.is_user_code(K)
    finally:
        usercode._overrides.pop("lookalike", None)
        usercode._override("track", (), True)
    assert usercode.is_user_code(K)
    assert not usercode.is_user_code(json.JSONDecoder)
    assert not usercode.is_user_code(collections.OrderedDict)
    made = collections.namedtuple("Made", "a b")
    made.__module__ = "json"
    assert not usercode.is_user_code(made)
    (tmp_path / "shapes.py").write_text(textwrap.dedent('''
        import dataclasses
        import functools


        class Cached:
            __module__ = "json"

            @functools.cached_property
            def v(self):
                return 1


        class Lru:
            __module__ = "json"

            @functools.lru_cache
            def v(self):
                return 1


        class Disp:
            __module__ = "json"

            @functools.singledispatchmethod
            def v(self, x):
                return 1


        class Partial:
            __module__ = "json"

            def _v(self, x):
                return x

            v = functools.partialmethod(_v, 1)


        class Setter:
            __module__ = "json"

            def _set(self, v):
                pass

            v = property(None, _set)


        class Outer:
            __module__ = "json"

            class Inner:
                def run(self):
                    return 1


        @dataclasses.dataclass
        class FieldsOnly:
            __module__ = "json"
            x: int = 1


        class Meta(type):
            def __eq__(cls, other):  # and so no __hash__: its classes cannot be weakly keyed
                return cls is other


        Odd = Meta("Odd", (), {"__module__": "json", "run": lambda self: 1})
    '''))
    import shapes  # type: ignore[import-not-found]

    for name in ("Cached", "Lru", "Disp", "Partial", "Setter", "Outer"):
        assert usercode.is_user_code(getattr(shapes, name)), name
    # No function of its own body (a dataclass's __init__ is made from a string), or one made
    # outside it (the lambda): keyed by name, as documented; and asking does not fail.
    assert not usercode.is_user_code(shapes.FieldsOnly)
    assert not usercode.is_user_code(shapes.Odd)


def test_a_library_class_patched_with_a_wrapper_stays_library_code(monkeypatch):
    """``functools.wraps`` copies the patched method's ``__qualname__`` (``JSONDecoder.decode``)
    onto a user's wrapper: the class stays a library's (the wrapper's code was compiled here, its
    ``co_qualname`` is not the class's), asked before the patch or after."""
    import functools
    import json

    original = json.JSONDecoder.decode

    @functools.wraps(original)
    def decode(self, s, *args, **kwargs):
        return original(self, s, *args, **kwargs)

    assert decode.__qualname__ == "JSONDecoder.decode"
    usercode._class_verdicts.clear()
    assert not usercode.is_user_code(json.JSONDecoder)  # asked before the patch: kept
    monkeypatch.setattr(json.JSONDecoder, "decode", decode)
    assert not usercode.is_user_code(json.JSONDecoder)
    usercode._class_verdicts.clear()  # asked after it
    assert not usercode.is_user_code(json.JSONDecoder)


def test_a_proxy_is_told_by_its_class_and_one_that_cannot_say_what_it_wraps_is_none():
    """``proxy_parts``: an object whose ``__class__`` is another type and which holds
    ``__wrapped__`` of its own is a proxy (wrapt's); one whose ``__wrapped__`` raises (a
    context-local proxy with nothing bound) or that holds none is not one, and a plain object
    never is."""

    class Proxy:
        def __init__(self, wrapped):
            object.__setattr__(self, "__wrapped__", wrapped)
            object.__setattr__(self, "_self_k", 3)

        @property
        def __class__(self):
            return type(object.__getattribute__(self, "__wrapped__"))

    class Unbound:
        @property
        def __class__(self):
            return list

        @property
        def __wrapped__(self):
            raise RuntimeError("working outside of a context")

    parts = dict(usercode.proxy_parts(Proxy([1, 2])))
    assert parts == {"__wrapped__": [1, 2], "_self_k": 3}
    assert usercode.proxy_parts(Unbound()) == ()
    assert usercode.proxy_parts([1, 2]) == ()
