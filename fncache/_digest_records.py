"""File digest records kept in the store, so that a warm call from a fresh process costs a ``stat``.

The digest table of :mod:`fncache.values.digests` lives in the process: without more, the first call
in every new process reads each file it keys (32 ms for 200 MB). A memoized function therefore also
keeps each (path, stat signature) -> digest record it computes for a file of 1 MiB or more in its own
store, as an ordinary entry, and asks the store before reading such a file the table does not know
(a smaller file is read and digested about as fast as a record is read, and a folder of many small
files would cost as many store writes).

Layout: a record is an entry under the key ``xxh3-128(("fncache.file-digest", path, signature))``,
the signature being size, ``mtime_ns``, ``ctime_ns``, inode and device; its value is the tuple
``(path, signature, digest)``, framed, checksummed and (with a secret) signed by :mod:`fncache._codec`
like a result, and read back through the same verified path (``Store.get_checked`` with the codec's
check, local tier first, then ``decode``): nothing unverified is unpickled. Its metadata names the
function :data:`RECORDS_FUNCTION`, under which ``fncache ls`` and ``info`` show the records;
``fncache clear`` removes them with everything else, and pruning treats them as any entry.

What a record can and cannot be trusted for. A record whose frame fails its check is removed where it
was read (as a damaged result is) and the file is read again. A sound frame whose value is not a
record for exactly the path and signature asked (a frame copied under another key is caught by the
frame check already; anything else, a planted tuple of another shape) is ignored and the file read
again. A record is never re-read after its check. With a secret set, a record nobody holding the
secret wrote is never used. Without a secret, whoever can write the store can plant a wrong digest,
exactly as they can plant a wrong result: the store is then trusted for both, as documented for
results. A file younger than the timestamp granularity is never recorded (see
:mod:`fncache.values.digests`), in the store as in the table.

Concurrency: records are written with ``Store.set`` (replacing: a sound frame that held something
else is overwritten, not kept forever); two processes hashing one file both read it and write one
record, the same. Failures to read or write a record are store failures of the
function (:meth:`fncache._entries.Entries.failed`): logged, or raised with ``on_store_error="raise"``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fncache import _codec
from fncache._callkey import PYTHON
from fncache._errors import IntegrityError
from fncache.values import hasher as _hasher

if TYPE_CHECKING:
    from fncache._entries import Entries

__all__ = ["RECORDS_FUNCTION", "StoredDigests", "record_key"]

#: The name records are listed under (``fncache ls``/``info``): not a function of the user's.
RECORDS_FUNCTION = "fncache.file-digests"


def record_key(path: str, sig: tuple[int, ...]) -> str:
    """The store key of the record of ``path`` with stat signature ``sig``."""
    return _hasher.digest(("fncache.file-digest", path, tuple(sig))).hex()


def _digest_in(value: Any, path: str, sig: tuple[int, ...]) -> bytes | None:
    """The digest a record holds if it is the record of exactly ``path`` at ``sig``, else None."""
    if type(value) is not tuple or len(value) != 3:
        return None
    recorded_path, recorded_sig, digest = value
    if recorded_path != path or recorded_sig != sig or type(digest) is not bytes or len(digest) != 16:
        return None
    return digest


class StoredDigests:
    """The digest records of one memoized function's store (see the module docstring)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Entries) -> None:
        self._entries = entries

    def get(self, path: str, sig: tuple[int, ...]) -> bytes | None:
        """The recorded digest of ``path`` at ``sig``, or ``None`` (no sound record)."""
        entries = self._entries
        if entries.off:
            return None
        key = record_key(path, sig)
        try:
            frame = entries.store.get_checked(key, entries.check)
            if frame is None:
                return None
            value, _ = _codec.decode(frame, key, secret=entries.options.accepted or None)
        except IntegrityError as e:
            self._reject(key, e)
            return None
        except Exception as e:  # a store failure: the file is read instead
            entries.failed("digest record", e)
            return None
        return _digest_in(value, path, tuple(sig))  # a sound frame holding something else: None

    def _reject(self, key: str, e: Exception) -> None:
        """A record that failed its check: said, and removed where it was read."""
        entries = self._entries
        entries.failed("digest record", e)
        try:
            entries.store.reject(key)
        except Exception as e2:
            entries.failed("delete", e2)

    def put(self, path: str, sig: tuple[int, ...], digest: bytes) -> None:
        """Keep the record of ``path`` at ``sig`` (replacing any); failures go to the policy."""
        entries = self._entries
        if entries.off:
            return
        key = record_key(path, sig)
        created = time.time()
        try:
            frame: Any = _codec.encode_parts((path, tuple(sig), digest), key, created=created,
                                             duration=0.0, secret=entries.options.secret)
            store = entries.store
            if not store.accepts_parts:
                frame = b"".join(frame)
            store.set(key, frame, {"function": RECORDS_FUNCTION, "created": created,
                                   "duration": 0.0, "python": PYTHON, "args": {}})
        except Exception as e:
            entries.failed("digest record", e)
