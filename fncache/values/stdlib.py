"""Keys for standard-library objects that cannot be pickled and hold what the code reads.

Such an object is keyed as infrastructure (by its type and the name it is read under) unless it has
a handler; these are the ones whose content decides what the code computes:

* a ``hashlib`` or ``hmac`` object (a salted prototype the code copies per call, an HMAC with its
  key): its algorithm and the digest of what it was fed so far, taken from a copy (the object is
  left as it was). By type alone, ``SALTED = hashlib.sha256(b"salt-v1")`` kept the key when the salt
  changed;
* an archive open for reading from a path (``zipfile.ZipFile``, ``tarfile.TarFile``): keyed as
  ``fncache.file(path)`` is, by its file's name and content, as its members are read when the code
  asks. Any other archive (open for writing, over a file object, or whose path names another file
  than the one it has open: replaced since, or a relative path after ``os.chdir``) is refused, like
  an open file.

Loaded the first time a value of one of these modules is looked up (see the hasher's table).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from fncache._errors import UnhashableArgument
from fncache._files import File
from fncache._hasher import Token
from fncache.values.registry import register_lazy, register_type, value_digest

__all__ = ["archive_token", "hash_state_token"]

#: The modules whose types hashlib's objects are (OpenSSL's, or Python's own per algorithm) and hmac.
HASH_MODULES = ("_hashlib", "_blake2", "_sha3", "_sha2", "_sha256", "_sha512", "_sha1", "_md5",
                "hmac")


def hash_state_token(h: Any, obj: Any) -> Any:
    """A hashlib or hmac object: its type, algorithm and the digest of a copy."""
    copy = obj.copy()
    try:
        digest = copy.digest()
    except TypeError:  # a SHAKE: its digest is as long as asked
        digest = copy.digest(64)
    t = type(obj)
    return (Token, ("hash state", t.__module__, t.__qualname__, obj.name, digest))


def archive_token(h: Any, value: Any) -> Any:
    """A zip or tar archive open for reading from a path: its file, as ``fncache.file(path)``, and
    every attribute not read from it (a zip archive's password and name encoding, which decide what
    its members read as; one set by code). Refused unless the path still names the file it has
    open: one replaced since (or a relative path after ``os.chdir``) would key another file's
    content than the one it reads."""
    path = value.filename if hasattr(value, "filename") else getattr(value, "name", None)
    if getattr(value, "mode", None) == "r" and not _over_file_object(value) \
            and isinstance(path, (str, os.PathLike)) and _still_names(path, value):
        # (a subclass by the archive class it derives from)
        own = next((_FROM_FILE[c.__name__] for c in type(value).__mro__ if c.__name__ in _FROM_FILE),
                   frozenset())
        extra = sorted((k, v) for k, v in vars(value).items() if k not in own)
        return (Token, ("archive", type(value).__module__, type(value).__qualname__, File(path),
                        *extra, *_directory(value)))
    t = type(value)
    raise UnhashableArgument(
        f"an archive open for writing, over a file object, or whose file was replaced since it "
        f"was opened ({t.__module__}.{t.__qualname__} {path!r}) is not keyed: open it from its "
        "path for reading (again), or pass the path as fncache.file(path)", type_name=t.__qualname__)


def _directory(value: Any) -> tuple[Any, ...]:
    """A zip archive's member list as it read it when opened (where each member lies in the file):
    what it reads members by, though the file be rewritten in place since. Its digest is kept per
    archive object, as an archive open for reading never reads its list again (200,000 members:
    0.1 s a call otherwise). (A tar archive reads its members as it goes: keyed by its file.)"""
    infos = getattr(value, "filelist", None)
    if infos is None:
        return ()
    found = _directories.get(value)
    if found is None:
        found = _directories[value] = value_digest(
            [(i.filename, i.header_offset, i.compress_size, i.file_size, i.CRC, i.compress_type)
             for i in infos])
    return (("directory", found),)


_directories: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()


def _over_file_object(value: Any) -> bool:
    """Whether the archive was opened over a file object (its ``name`` then is that object's)."""
    return bool(getattr(value, "_filePassed", False) or getattr(value, "_extfileobj", False))


def _still_names(path: Any, value: Any) -> bool:
    """Whether ``path`` names the very file the archive has open (same device and inode)."""
    handle: Any = getattr(value, "fp", None) if hasattr(value, "filename") else value.fileobj
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except (AttributeError, OSError, ValueError):  # closed, or no file descriptor
        return False


# What an HMAC's slots hold: keyed by the algorithm's name and the digest of a copy.
_HMAC_STATE = (("_hmac, _inner, _outer, digest_cons", "the state: keyed by the digest of a copy"),
               ("block_size, digest_size", "constants of the algorithm, keyed by its name"))


def _register_hash_states() -> None:
    import hmac

    for t in {hmac.HMAC, *_hash_types()}:
        if callable(getattr(t, "copy", None)) and callable(getattr(t, "digest", None)):
            register_type(t, hash_state_token, exact=True, library="hashlib",
                          not_content=_HMAC_STATE if t is hmac.HMAC else ())


def _hash_types() -> set[type]:
    """The types of the objects ``hashlib`` makes here, by algorithm (OpenSSL's or Python's own),
    and of those Python's own modules make directly (``_md5.md5()``)."""
    import hashlib
    import importlib

    found: set[type] = set()
    for name in sorted(hashlib.algorithms_available):
        try:
            found.add(type(hashlib.new(name)))
        except (ValueError, TypeError):  # listed but not usable here (a FIPS build)
            continue
    for module in HASH_MODULES:
        try:
            found.update(t for t in vars(importlib.import_module(module)).values()
                         if isinstance(t, type) and t.__module__ == module)
        except ImportError:
            continue
    return found


for _module in HASH_MODULES:
    register_lazy(_module)(_register_hash_states)


# What an archive holds that is read from its file (keyed as the file) or is a live handle, by
# class: every other attribute (a zip's password and name encoding, a tar's name encoding and
# error handling, one set by code) is keyed.
_FROM_FILE = {
    "ZipFile": frozenset({"fp", "filename", "mode", "filelist", "NameToInfo", "start_dir",
                          "_comment", "_lock", "_fileRefCnt", "_seekable", "_didModify",
                          "_filePassed", "_writing"}),
    "TarFile": frozenset({"fileobj", "name", "mode", "_mode", "_extfileobj", "closed", "members",
                          "firstmember", "offset", "_loaded", "inodes", "pax_headers"}),
}


def _from_file(cls: str) -> tuple[tuple[str, str], ...]:
    return ((", ".join(sorted(_FROM_FILE[cls])), "read from its file (keyed) or a live handle"),)


@register_lazy("zipfile")
def _register_zip() -> None:
    import zipfile

    register_type(zipfile.ZipFile, archive_token, library="zipfile", not_content=_from_file("ZipFile"))


@register_lazy("tarfile")
def _register_tar() -> None:
    import tarfile

    register_type(tarfile.TarFile, archive_token, library="tarfile", not_content=_from_file("TarFile"))
