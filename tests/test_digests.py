"""The file digest table: reused while a file's stat signature holds, re-read when any part changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import xxhash

import fncache
from fncache.values import digests as _digests
from fncache.values import hasher as _hasher


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty table that keeps records of files of any age (the two-second rule is tested
    separately)."""
    _digests.clear()
    monkeypatch.setattr(_digests, "_RACY_NS", -1)


def test_rewrite_with_size_and_mtime_put_back_is_a_new_digest(tmp_path: Path, table: None) -> None:
    """A file rewritten with bytes of one length and its mtime set back gives the new bytes'
    digest: ctime (which os.utime cannot set) is part of the signature."""
    p = tmp_path / "a.bin"
    p.write_bytes(b"AAAA")
    before = os.stat(p)
    assert _digests.file_digest(str(p)) == xxhash.xxh3_128_digest(b"AAAA")
    p.write_bytes(b"BBBB")
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(p).st_mtime_ns == before.st_mtime_ns
    assert _digests.file_digest(str(p)) == xxhash.xxh3_128_digest(b"BBBB")


def test_unchanged_file_reuses_its_record(tmp_path: Path, table: None) -> None:
    """The record of an unchanged file is the one kept; the signature covers size, mtime, ctime,
    inode and device."""
    p = tmp_path / "a.bin"
    p.write_bytes(b"data")
    d = _digests.file_digest(str(p))
    st = os.stat(p)
    assert _digests._table[str(p)] == (
        (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev), d)
    assert _digests.file_digest(str(p)) is d  # the same object: taken from the table, not re-read


def test_a_young_file_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed within the racy window (two seconds; widened here so that a paused test
    cannot age the file past it) is digested but not recorded: it could be rewritten again with
    the same size and timestamps."""
    _digests.clear()
    monkeypatch.setattr(_digests, "_RACY_NS", 10**18)
    p = tmp_path / "a.bin"
    p.write_bytes(b"fresh")
    _digests.file_digest(str(p))
    assert str(p) not in _digests._table


def _walk_digest(root: Path) -> bytes:
    """The definition of a folder's digest, as os.walk gives it (symlinked folders followed)."""
    parts = []
    for base, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(base, name)
            with open(full, "rb") as f:
                d = xxhash.xxh3_128_digest(f.read())
            parts.append((os.path.relpath(full, root).replace(os.sep, "/"), d))
    return _hasher.digest(("dir", tuple(parts)))


def test_folder_digest_matches_the_os_walk_definition(tmp_path: Path, table: None) -> None:
    """One scandir pass gives the digest os.walk gives: files before subfolders, sorted names,
    symlinked folders followed (a function reading every file below a folder reads through them)."""
    (tmp_path / "d" / "b" / "c").mkdir(parents=True)
    (tmp_path / "d" / "a").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_text("x")
    for rel, text in [("z.txt", "1"), ("a.txt", "2"), ("b/c/deep", "3"), ("a/one", "4"),
                      (".hidden", "5")]:
        (tmp_path / "d" / rel).write_text(text)
    os.symlink(tmp_path / "outside", tmp_path / "d" / "link")
    assert _digests.path_digest(tmp_path / "d") == _walk_digest(tmp_path / "d")
    (tmp_path / "d" / "b" / "new").write_text("6")
    assert _digests.path_digest(tmp_path / "d") == _walk_digest(tmp_path / "d")


def test_glob_expansion_is_a_superset(tmp_path: Path) -> None:
    """A glob is matched against every file below its literal prefix, ``*`` crossing folders and
    matching dot files: no file a reader's own glob could read is left out."""
    for rel in ("x.parquet", ".h.parquet", "sub/y.parquet", "note.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    base, found = _digests.expand_glob(str(tmp_path / "*.parquet"))
    assert base == str(tmp_path)
    assert [rel for rel, _, _ in found] == [".h.parquet", "x.parquet", "sub/y.parquet"]
    assert _digests.expand_glob(str(tmp_path / "missing" / "*.csv"))[1] == []


def test_following_symlinked_folders_visits_each_once(tmp_path: Path) -> None:
    """A folder's listing descends into a symlinked folder, and a link back up (a cycle) is not
    walked again but listed as the link it is; ``follow=False`` skips it."""
    (tmp_path / "top").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_text("f")
    os.symlink(tmp_path / "other", tmp_path / "top" / "link")
    os.symlink(tmp_path / "top", tmp_path / "other" / "back")
    names = [rel for rel, _, _ in _digests.tree_files(str(tmp_path / "top"))]
    assert names == ["link/f", "link/back"]
    assert _digests.tree_files(str(tmp_path / "top"), follow=False) == []


def test_a_second_link_to_a_listed_folder_lists_its_files_again(tmp_path: Path) -> None:
    """Two symlinks to one real folder: a reader that follows links reads its files through
    both, so the listing names them under both links (the real folder is walked once), and
    adding the second link is a miss for a function reading the folder."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "x.txt").write_text("3")
    (tmp_path / "real" / "sub" / "y.txt").write_text("2")
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "data" / "a")

    @fncache.memoize(store=str(tmp_path / "store"))
    def total(folder):
        return sum(int(open(os.path.join(d, n)).read())
                   for d, _, names in os.walk(folder, followlinks=True) for n in names)

    assert total(fncache.file(tmp_path / "data")) == 5
    os.symlink(tmp_path / "real", tmp_path / "data" / "b")
    names = [rel for rel, _, _ in _digests.tree_files(str(tmp_path / "data"))]
    assert names == ["a/x.txt", "a/sub/y.txt", "b/x.txt", "b/sub/y.txt"]
    assert total(fncache.file(tmp_path / "data")) == 10
    assert total.cache_info().hits == 0


def test_glob_characters_in_the_working_directory_are_literal(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative pattern run from a folder whose name has glob characters matches below it."""
    here = tmp_path / "run[1]"
    (here / "data").mkdir(parents=True)
    (here / "data" / "a.csv").write_text("a")
    monkeypatch.chdir(here)
    base, found = _digests.expand_glob("data/*.csv")
    assert base == str(here / "data") and [rel for rel, _, _ in found] == ["a.csv"]
