"""Results <-> stored bytes: pickle protocol 5, buffers beside the pickle, a checksum, an optional MAC.

Frame layout (all integers little-endian)::

    0   magic  b"FNC" + format version (1)
    4   flags  u8  (1: signed, 2: zstd, 4: lz4, 8: head checksum)   5..7 reserved (0)
    8   created   f64 (POSIX time the value was computed)
    16  duration  f64 (seconds the computation took)
    24  pickle length u64, 32 buffer count u32, 36 reserved u32
    40  buffer lengths, u64 each
    ..  checksum: xxh3-128 over key, header and body      (16 bytes)
    ..  head checksum: the same digest, taken where the pickle and its padding end
                                         (16 bytes, flag 8: uncompressed frames with buffers)
    ..  MAC: HMAC-SHA256 over key, header and body         (32 bytes, only when signed)
    ..  zero padding to a multiple of 64
    body: the pickle, then each out-of-band buffer, each starting on a 64-byte boundary
          (the whole body compressed when a compression flag is set)

Why this shape: large buffers (numpy, pandas, arrow) are written and read back without being copied
into or out of the pickle, aligned so they can be used in place or memory-mapped. The checksum covers
the key too, so an entry moved to another key (by a bug, a tool or a person) fails like a corrupt one.
With a secret the MAC is checked *before* anything is unpickled: loading a pickle runs code, and a
cache directory or a shared bucket is a place where someone could plant one.

Reading a frame from a file (:func:`read_frame`) checks the checksum while reading: each chunk is
hashed right after it is read, while it is still in the CPU cache, instead of in a second pass over
the whole frame from memory (a second pass costs a third of the time of a warm 256 MB load). The
frame comes back as a :class:`ReadFrame` that records the key it was checked for, and :func:`decode`
does not hash it again. The MAC (with a secret) is still computed in :func:`decode`, before
anything is unpickled.

The head checksum serves memory-mapped reads (``decode(..., verify_buffers=False)``): checking
the header and pickle costs microseconds, while checking 256 MB of buffers costs tens of
milliseconds and reads every page that the map exists to leave on disk. It is one digest of one
stream (xxh3's state can be read mid-stream), so a full decode checks both at the cost of one.
"""

from __future__ import annotations

import hmac
import mmap
import pickle
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import xxhash

from fncache._errors import ConfigError, IntegrityError

__all__ = ["Header", "ReadFrame", "UnpicklableResult", "decode", "encode", "encode_parts",
           "read_frame", "read_header"]

MAGIC = b"FNC\x01"
_FIXED = struct.Struct("<4sB3xddQII")
_SIGNED, _ZSTD, _LZ4, _HEADCHECK = 1, 2, 4, 8
_LEN = struct.Struct("<Q")
_ALIGN = 64
_CHECK = 16
_MAC = 32
# Buffers smaller than this in total stay inside the pickle: not worth a separate, aligned region.
_OUT_OF_BAND_MIN = 64 * 1024
COMPRESSORS = ("zstd", "lz4")
# Bytes read (and hashed) at a time by read_frame: small enough to be hashed from the CPU cache
# right after the read put them there, large enough that the system calls cost nothing (256 reads
# for 256 MB). Measured (CPU time, 256 MB warm): 128 KiB 54 ms, 1 MiB 51, 4 MiB 51, 16 MiB 55.
_CHUNK = 1024 * 1024
_HUGE_PAGE = 2 * 1024 * 1024


class UnpicklableResult(TypeError):
    """The function's result cannot be pickled; it is returned to the caller but not stored."""


class Header(NamedTuple):
    """What a frame says about itself, readable without unpickling.

    A named tuple rather than a dataclass: it is built on every cache hit, and a frozen dataclass
    costs a microsecond more to construct.
    """

    created: float
    duration: float
    signed: bool
    compression: str | None
    pickle_len: int
    buffer_lens: tuple[int, ...]
    body_offset: int


def _pad(n: int) -> int:
    return -n % _ALIGN


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    import lz4.frame

    return lz4.frame.compress(data)  # type: ignore[no-any-return]


def _decompress(kind: str, data: memoryview) -> bytes:
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data)
    import lz4.frame

    return lz4.frame.decompress(data)  # type: ignore[no-any-return]


def check_compress(compress: Any) -> str | None:
    """Validate a ``compress=`` option: ``None``/``False``, ``True`` (zstd), ``"zstd"`` or ``"lz4"``."""
    if compress is None or compress is False or compress == 0:
        return None
    if compress is True or (isinstance(compress, int) and not isinstance(compress, bool)):
        compress = "zstd"
    if compress not in COMPRESSORS:
        raise ConfigError(f"compress: expected one of {COMPRESSORS} or a bool, got {compress!r}")
    module = "zstandard" if compress == "zstd" else "lz4"
    try:
        __import__(module)
    except ImportError as e:
        raise ConfigError(
            f"compress={compress!r} needs the {module!r} package: pip install 'fncache[{compress}]'"
        ) from e
    return str(compress)


def _pickle(value: Any) -> tuple[bytes, list[pickle.PickleBuffer]]:
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        # Lambdas, local classes, objects of __main__-made types: cloudpickle takes them by value.
        import cloudpickle

        buffers = []
        try:
            data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        except Exception as e:
            raise UnpicklableResult(
                f"result of type {type(value).__module__}.{type(value).__qualname__} "
                f"cannot be pickled: {e}"
            ) from e
    if buffers and sum(memoryview(b).nbytes for b in buffers) < _OUT_OF_BAND_MIN:
        try:
            data, buffers = pickle.dumps(value, protocol=5), []
        except Exception:
            import cloudpickle

            data, buffers = cloudpickle.dumps(value, protocol=5), []
    return data, buffers


def _mac(secret: bytes, key: bytes, header: Any, body: list[Any]) -> bytes:
    m = hmac.new(secret, key, "sha256")
    m.update(header)
    for part in body:
        m.update(part)
    return m.digest()


def _checksum(key: bytes, header: Any, body: list[Any]) -> bytes:
    h = xxhash.xxh3_128(key)
    h.update(header)
    for part in body:
        h.update(part)
    return h.digest()


def _checksums(key: bytes, header: Any, head: Any, rest: list[Any]) -> tuple[bytes, bytes]:
    """(full checksum, head checksum): one stream, read once where ``head`` ends."""
    h = xxhash.xxh3_128(key)
    h.update(header)
    h.update(head)
    at_head = h.digest()
    for part in rest:
        h.update(part)
    return h.digest(), at_head


def encode(
    value: Any,
    key: str,
    *,
    created: float,
    duration: float,
    secret: bytes | None = None,
    compress: str | None = None,
) -> bytes:
    """The stored form of ``value`` under ``key``. Raises :class:`UnpicklableResult`."""
    return b"".join(encode_parts(value, key, created=created, duration=duration, secret=secret,
                                 compress=compress))


def encode_parts(
    value: Any,
    key: str,
    *,
    created: float,
    duration: float,
    secret: bytes | None = None,
    compress: str | None = None,
) -> list[Any]:
    """:func:`encode` as a list of parts to be stored one after another.

    Large buffers stay where the result holds them (no copy into one big ``bytes``): a store that
    writes files writes them in place. The parts must not be modified until they are stored.
    """
    data, buffers = _pickle(value)
    views = [b.raw() for b in buffers]
    body: list[Any] = [data, b"\0" * _pad(len(data))]
    for v in views:
        body.append(v)
        body.append(b"\0" * _pad(v.nbytes))
    flags = 0
    if compress:
        body = [_compress(compress, b"".join(body))]
        flags |= _ZSTD if compress == "zstd" else _LZ4
    elif views:
        flags |= _HEADCHECK
    if secret:
        flags |= _SIGNED
    header = _FIXED.pack(MAGIC, flags, created, duration, len(data), len(views), 0)
    header += b"".join(_LEN.pack(v.nbytes) for v in views)
    kb = key.encode()
    if flags & _HEADCHECK:
        full, at_head = _checksums(kb, header, b"".join(body[:2]), body[2:])
        trailer = full + at_head
    else:
        trailer = _checksum(kb, header, body)
    if secret:
        trailer += _mac(secret, kb, header, body)
    head = header + trailer
    return [head + b"\0" * _pad(len(head)), *body]


def _body_offset(flags: int, nbuf: int) -> int:
    """Where the body starts: after the header, its buffer lengths, the trailer and padding."""
    trailer = _CHECK * (2 if flags & _HEADCHECK else 1) + (_MAC if flags & _SIGNED else 0)
    head = _FIXED.size + 8 * nbuf + trailer
    return head + _pad(head)


def _parse(view: memoryview) -> tuple[Header, int, int]:
    """(header, flags, end of the buffer-length table) of a frame; IntegrityError if malformed."""
    if view.nbytes < _FIXED.size:
        raise IntegrityError("not an fncache entry (bad magic or truncated header)")
    magic, flags, created, duration, plen, nbuf, _ = _FIXED.unpack_from(view)
    if magic != MAGIC:
        raise IntegrityError("not an fncache entry (bad magic or truncated header)")
    lens_end = _FIXED.size + 8 * nbuf
    trailer = _CHECK * (2 if flags & _HEADCHECK else 1) + (_MAC if flags & _SIGNED else 0)
    if view.nbytes < lens_end + trailer:
        raise IntegrityError("truncated entry header")
    lens = struct.unpack_from(f"<{nbuf}Q", view, _FIXED.size) if nbuf else ()
    comp = "zstd" if flags & _ZSTD else "lz4" if flags & _LZ4 else None
    header = Header(created, duration, bool(flags & _SIGNED), comp, plen, lens,
                    _body_offset(flags, nbuf))
    return header, flags, lens_end


def read_header(frame: Any) -> Header:
    """Parse a frame's header; raises :class:`IntegrityError` if it is not a well-formed frame."""
    return _parse(memoryview(frame))[0]


class ReadFrame(mmap.mmap):
    """A frame read by :func:`read_frame` into private, writable memory.

    ``checked_for`` is the key whose checksums matched while the frame was read, or ``None`` (not
    a well-formed frame, or a mismatch: :func:`decode` then checks it again, and rejects it). Only
    :func:`read_frame` sets it, after the check; the memory is private to this process.
    """

    checked_for: str | None = None


def _allocate(size: int) -> ReadFrame:
    """Private anonymous memory for ``size`` bytes, in huge pages where the kernel allows it.

    Not ``bytearray`` (it zero-fills first) nor ``numpy.empty`` (for a size that is not a multiple
    of 2 MiB it gets 4 KiB pages): faulting in 20,000 small pages costs more than reading the data
    into them (measured on Linux 6.x: 80 MB read into ``numpy.empty`` 87 ms, into this map 35 ms).
    Private, not shared: a forked child must not see the parent's writes to arrays that live here.
    """
    private = getattr(mmap, "MAP_PRIVATE", None)
    frame = ReadFrame(-1, size) if private is None else ReadFrame(-1, size, flags=private)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None and size >= _HUGE_PAGE:
        try:
            frame.madvise(advice)
        except OSError:  # a kernel without transparent huge pages: small pages, still correct
            pass
    return frame


def _fill(readinto: Callable[[memoryview], int | None], view: memoryview, pos: int,
          end: int) -> int | None:
    """Read ``view[pos:end]`` whole; ``end``, or None if the source ran dry first."""
    while pos < end:
        n = readinto(view[pos:end])
        if not n:
            return None
        pos += n
    return pos


def _read_checked(readinto: Callable[[memoryview], int | None], view: memoryview, key: str,
                  chunk: int) -> bool | None:
    """Fill ``view`` chunk by chunk, hashing each chunk as it arrives; whether the frame's
    checksums (full, and head if it has one) match for ``key``; None if the source ran dry."""
    size = view.nbytes
    pos = _fill(readinto, view, 0, min(size, chunk))
    if pos is None:
        return None
    body = split = None
    if size >= _FIXED.size:
        magic, flags, _, _, plen, nbuf, _ = _FIXED.unpack_from(view)
        body = _body_offset(flags, nbuf) if magic == MAGIC else None
    if body is None or body > size:
        # Not a frame (or a damaged one): read it all unchecked; decode says what is wrong.
        return None if _fill(readinto, view, pos, size) is None else False
    pos = _fill(readinto, view, pos, max(pos, body))  # a long buffer table: header first
    if pos is None:
        return None
    header_end = _FIXED.size + 8 * nbuf
    if flags & _HEADCHECK:
        split = body + plen + _pad(plen)
    hasher = xxhash.xxh3_128(key.encode())
    hasher.update(view[:header_end])
    at_head = None
    done = body
    while True:
        if split is not None and done <= split <= pos:
            hasher.update(view[done:split])
            done, at_head, split = split, hasher.digest(), None
        hasher.update(view[done:pos])
        done = pos
        if pos == size:
            break
        pos = _fill(readinto, view, pos, min(size, pos + chunk))
        if pos is None:
            return None
    ok = hasher.digest() == bytes(view[header_end : header_end + _CHECK])
    trailer_end = header_end + _CHECK * (2 if flags & _HEADCHECK else 1)
    trailer_end += _MAC if flags & _SIGNED else 0
    ok = ok and view[trailer_end:body] == bytes(body - trailer_end)  # padding, as decode checks
    if flags & _HEADCHECK:
        ok = ok and at_head == bytes(view[header_end + _CHECK : header_end + 2 * _CHECK])
    return ok


def read_frame(readinto: Callable[[memoryview], int | None], size: int, key: str, *,
               chunk: int = _CHUNK) -> ReadFrame | bytes | None:
    """The ``size`` bytes ``readinto`` (a file's) yields, checked for ``key`` as they are read.

    A frame whose checksums match comes back as a :class:`ReadFrame` that :func:`decode` trusts
    for ``key`` without hashing it again. Anything else (not a frame, damaged, another key's)
    comes back unchecked, for :func:`decode` to reject. ``None`` if the source runs dry before
    ``size`` bytes (a file truncated meanwhile: not a whole frame). ``chunk``: bytes per read.
    """
    if size == 0:
        return b""
    frame = _allocate(size)
    view = memoryview(frame)
    try:
        checked = _read_checked(readinto, view, key, chunk)
    finally:
        view.release()
    if checked is None:
        return None
    if checked:
        frame.checked_for = key
    return frame


def decode(
    frame: Any, key: str, *, secret: bytes | None = None, verify_buffers: bool = True
) -> tuple[Any, Header]:
    """``(value, header)`` from a frame stored under ``key``.

    The checksum (and, with ``secret``, the MAC) is verified before unpickling; any mismatch, truncation
    or unsigned entry under a secret raises :class:`IntegrityError` and nothing is unpickled. Errors
    raised while unpickling a verified frame (a class that no longer exists) propagate as they are.
    A buffer-carrying frame given as read-only ``bytes`` is copied once so the arrays it yields are
    writable; a writable ``bytearray`` or a memory map is used in place.

    ``verify_buffers=False`` (for memory-mapped frames) checks the header and pickle but not the
    out-of-band buffers' bytes, which are then never read here: loading is as fast as mapping.
    Without a secret a corrupted buffer then goes unnoticed (as with ``numpy.load(mmap_mode="r")``);
    with a secret the MAC, which covers everything, is still checked in full. Frames without a head
    checksum (compressed, or no buffers) are checked in full either way.

    A :class:`ReadFrame` checked for ``key`` while it was read is not hashed again (its MAC, with a
    secret, is still checked here).
    """
    view = memoryview(frame)
    h, flags, header_end = _parse(view)
    header = view[:header_end]
    check = view[header_end : header_end + _CHECK]
    mac_at = header_end + (2 * _CHECK if flags & _HEADCHECK else _CHECK)
    # The padding before the body is not hashed: it must be zero, so that no byte of a frame can
    # change unnoticed (a frame cut short here fails its checksum below instead).
    padding = view[mac_at + (_MAC if flags & _SIGNED else 0) : h.body_offset]
    if padding != bytes(padding.nbytes):
        raise IntegrityError("entry header padding is not zero (corrupted)")
    body_view = view[h.body_offset :]
    kb = key.encode()
    if secret:
        if not h.signed:
            raise IntegrityError("entry is not signed, but a secret is configured")
        mac = bytes(view[mac_at : mac_at + _MAC])
        if not hmac.compare_digest(mac, _mac(secret, kb, header, [body_view])):
            raise IntegrityError("entry signature does not match (tampered, or another secret)")
    if type(frame) is ReadFrame and frame.checked_for == key:
        ok = True  # both checksums matched while it was read (read_frame)
    elif flags & _HEADCHECK:
        split = h.pickle_len + _pad(h.pickle_len)
        if not verify_buffers:
            ok = _checksum(kb, header, [body_view[:split]]) == view[mac_at - _CHECK : mac_at]
        else:
            full, at_head = _checksums(kb, header, body_view[:split], [body_view[split:]])
            ok = full == check and at_head == view[mac_at - _CHECK : mac_at]
    else:
        ok = _checksum(kb, header, [body_view]) == check
    if not ok:
        raise IntegrityError("entry checksum does not match (corrupted or truncated)")
    if h.compression:
        try:
            body: Any = memoryview(bytearray(_decompress(h.compression, body_view)))
        except Exception as e:
            raise IntegrityError(f"entry does not decompress: {e}") from e
    elif h.buffer_lens:
        body = body_view
        if body.readonly and not isinstance(frame, _MAPPED_TYPES):
            body = memoryview(bytearray(body))
    else:
        body = body_view
    if not h.buffer_lens:
        if body.nbytes < h.pickle_len:
            raise IntegrityError("entry body is shorter than its header says")
        return pickle.loads(body[: h.pickle_len]), h
    expected = h.pickle_len + _pad(h.pickle_len) + sum(n + _pad(n) for n in h.buffer_lens)
    if body.nbytes < expected:
        raise IntegrityError("entry body is shorter than its header says")
    buffers = []
    pos = h.pickle_len + _pad(h.pickle_len)
    for n in h.buffer_lens:
        buffers.append(body[pos : pos + n])
        pos += n + _pad(n)
    value = pickle.loads(body[: h.pickle_len], buffers=buffers)
    return value, h


# Memory maps are used in place even when read-only: a file's map is never written through.
_MAPPED_TYPES: tuple[type, ...] = (mmap.mmap,)
