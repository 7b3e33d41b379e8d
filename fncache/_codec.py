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

Reading a frame from a file (:func:`read_frame`) checks its checksum while reading: each chunk is
hashed right after it is read, while it is still in the CPU cache, instead of in a second pass over
the whole frame from memory. Each out-of-band buffer is read into memory of its own (see
:class:`ReadFrame`), and :func:`decode` trusts the frame for the key it was checked for without
hashing it again. The MAC (with a secret) is still checked in :func:`decode`, before anything is
unpickled.

A large frame bound for a file is checksummed while it is written (``encode_parts(..., late=True)``,
:class:`fncache._framedigests.LateFrame`): body first, head last, the same bytes.

The head checksum serves memory-mapped reads (``decode(..., verify_buffers=False)``): checking
the header and pickle costs microseconds, while checking 256 MB of buffers costs tens of
milliseconds and reads every page that the map exists to leave on disk. It is one digest of one
stream (xxh3's state can be read mid-stream), so a full decode checks both at the cost of one.
"""

from __future__ import annotations

import functools
import mmap
import pickle
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import xxhash

from fncache import _bands, _preads
from fncache._compression import check_compress, compress_body, decompress_body
from fncache._errors import IntegrityError
from fncache._framedigests import LATE_MIN, LateFrame
from fncache._framedigests import check_mac as _check_mac
from fncache._framedigests import checksum as _checksum
from fncache._framedigests import checksums as _checksums
from fncache._framedigests import mac as _mac

# check_compress: of fncache._compression, for the options
__all__ = ["Header", "ReadFrame", "UnpicklableResult", "check_compress", "decode", "decode_small",
           "encode", "encode_parts", "frame_size", "read_frame", "read_header", "verify"]

MAGIC = b"FNC\x01"
#: What the readers take: one secret, or several (a rotation: any of them is accepted), or None.
Secrets = bytes | tuple[bytes, ...] | None
_FIXED = struct.Struct("<4sB3xddQII")
_SIGNED, _ZSTD, _LZ4, _HEADCHECK = 1, 2, 4, 8
_LEN = struct.Struct("<Q")
_ALIGN, _CHECK, _MAC = 64, 16, 32  # body alignment, checksum and MAC sizes
# Bytes read (and hashed) at a time by read_frame: :data:`fncache._preads.CHUNK`.
_CHUNK = _preads.CHUNK


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


#: Pickles up to this size are framed by encode_parts's one-step path (joined once to checksum).
_SMALL = 64 * 1024


def _pad(n: int) -> int:
    return -n % _ALIGN


def _pickle(value: Any) -> tuple[bytes, list[pickle.PickleBuffer]]:
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = _bands.dumps(value, buffers.append)
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
    if buffers and sum(memoryview(b).nbytes for b in buffers) < _bands.OUT_OF_BAND_MIN:
        try:
            data, buffers = pickle.dumps(value, protocol=5), []
        except Exception:
            import cloudpickle

            data, buffers = cloudpickle.dumps(value, protocol=5), []
    return data, buffers


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
    late: bool = False,
) -> list[Any]:
    """:func:`encode` as a list of parts to be stored one after another.

    Large buffers stay where the result holds them (no copy into one big ``bytes``): a store that
    writes files writes them in place. The parts must not be modified until they are stored.
    ``late``: a large frame may come as a :class:`~fncache._framedigests.LateFrame`, checksummed
    while it is written (for a store that writes files).
    """
    data, buffers = _pickle(value)
    if not buffers and not compress and not secret and len(data) <= _SMALL:
        return _small_frame(data, key, created, duration)
    return _frame(data, buffers, key, created, duration, secret, compress, late)


def _frame(data: bytes, buffers: list[pickle.PickleBuffer], key: str, created: float,
           duration: float, secret: bytes | None, compress: str | None,
           late: bool = False) -> list[Any]:
    """:func:`encode_parts` of a pickle and its out-of-band buffers (the general path)."""
    views = [b.raw() for b in buffers]
    body: list[Any] = [data, b"\0" * _pad(len(data))]
    for v in views:
        body.append(v)
        body.append(b"\0" * _pad(v.nbytes))
    flags = 0
    if compress:
        body = [compress_body(compress, b"".join(body))]
        flags |= _ZSTD if compress == "zstd" else _LZ4
    elif views:
        flags |= _HEADCHECK
    if secret:
        flags |= _SIGNED
    header = _FIXED.pack(MAGIC, flags, created, duration, len(data), len(views), 0)
    header += b"".join(_LEN.pack(v.nbytes) for v in views)
    return _headed(body, key.encode(), header, flags, secret, late)


def _headed(body: list[Any], kb: bytes, header: bytes, flags: int, secret: bytes | None,
            late: bool) -> list[Any]:
    """The frame's parts: its head (the header, checksums, MAC and padding), then ``body``."""
    if late and flags == _HEADCHECK and sum(v.nbytes for v in body[2::2]) >= LATE_MIN:
        size = len(header) + 2 * _CHECK  # the header, the checksum and the head checksum
        return LateFrame(body, kb, header, size + _pad(size))
    if flags & _HEADCHECK:
        full, at_head = _checksums(kb, header, b"".join(body[:2]), body[2:])
        trailer = full + at_head
    else:
        trailer = _checksum(kb, header, body)
    if secret:
        trailer += _mac(secret, kb, header, body)
    head = header + trailer
    return [head + b"\0" * _pad(len(head)), *body]


def _small_frame(data: bytes, key: str, created: float, duration: float) -> list[Any]:
    """:func:`encode_parts` of the commonest frame (a small pickle, no buffers, compression or
    secret) in one step, byte for byte the general path's: one checksum over the joined parts."""
    header = _FIXED.pack(MAGIC, 0, created, duration, len(data), 0, 0)
    pad = b"\0" * _pad(len(data))
    head = header + xxhash.xxh3_128_digest(b"".join((key.encode(), header, data, pad)))
    return [head + b"\0" * _pad(len(head)), data, pad]


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
    head = lens_end + trailer  # as _body_offset, inline: this runs on every hit
    comp = "zstd" if flags & _ZSTD else "lz4" if flags & _LZ4 else None
    header = Header(created, duration, bool(flags & _SIGNED), comp, plen, lens, head + _pad(head))
    return header, flags, lens_end


def read_header(frame: Any) -> Header:
    """Parse a frame's header; raises :class:`IntegrityError` if it is not a well-formed frame."""
    if type(frame) is ReadFrame:
        frame = frame.head
    return _parse(memoryview(frame).cast("B"))[0]


class ReadFrame:
    """A frame that :func:`read_frame` read and checked for ``checked_for``, kept in pieces.

    ``head`` holds the header, trailer and pickle; ``rest`` each out-of-band buffer, in memory
    of its own, followed by its padding. Separate allocations, not one: the allocator recycles
    freed memory for allocations up to a few tens of MB but maps fresh memory (to be faulted in
    page by page) for anything larger, so a frame of many buffers loads as fast as unpickling
    them from a file; and an array of the result that outlives the others keeps only its own
    memory alive. ``bytes(frame)`` gives the frame as stored. Only :func:`read_frame` makes
    these, after the check.
    """

    __slots__ = ("checked_for", "head", "rest")

    def __init__(self, checked_for: str, head: Any, rest: list[Any]) -> None:
        self.checked_for = checked_for
        self.head = head
        self.rest = rest

    def __bytes__(self) -> bytes:
        return b"".join([memoryview(p).cast("B") for p in (self.head, *self.rest)])


def frame_size(header: Any) -> int | None:
    """The exact size in bytes of the uncompressed frame that starts with ``header`` (its fixed
    part and buffer-length table), or None for a compressed one (its size is known only once it
    is read). Raises :class:`IntegrityError` if ``header`` is not a frame's."""
    return _size_of(_parse(memoryview(header).cast("B"))[0])


def _size_of(h: Header) -> int | None:
    if h.compression:
        return None
    return h.body_offset + h.pickle_len + _pad(h.pickle_len) + sum(n + _pad(n) for n in h.buffer_lens)


def read_frame(readinto: Callable[[memoryview], int | None], size: int, key: str, *,
               chunk: int = _CHUNK, fd: int | None = None) -> ReadFrame | Any:
    """The ``size`` bytes ``readinto`` (a file's) yields, checked for ``key`` as they are read.

    The header is read first: a source that is not a frame, or whose ``size`` is not the one its
    header gives (a planted sparse file of gigabytes holding a small frame), raises
    :class:`IntegrityError` before anything else is read or hashed. An uncompressed frame with
    out-of-band buffers whose checksums match comes back as a :class:`ReadFrame`, which
    :func:`decode` trusts for ``key`` without hashing it again. Anything else (damaged, another
    key's) comes back as one writable buffer, unchecked, for :func:`decode` to check (and
    reject). ``None`` if the source runs dry before ``size`` bytes (a file truncated meanwhile:
    not a whole frame). ``chunk``: bytes per read. ``fd``: the file ``readinto`` reads, at its
    position: large buffers are then read on two threads (:mod:`fncache._preads`).
    """
    header = _read_prefix(readinto, size, chunk)
    if header is None:
        return None
    prefix, flags, plen, nbuf = header
    if flags & (_HEADCHECK | _ZSTD | _LZ4) != _HEADCHECK or not nbuf:
        return _read_rest(memoryview(prefix), readinto, size, chunk)
    return _read_checked(readinto, prefix, key, flags, plen, nbuf, chunk, fd)


def _read_prefix(readinto: Callable[[memoryview], int | None], size: int,
                 chunk: int) -> tuple[bytearray, int, int, int] | None:
    """The frame's fixed header and buffer-length table (its first body-offset bytes), read and
    checked against ``size``, with its flags, pickle length and buffer count; None if the source
    ran dry. Raises :class:`IntegrityError` for a source that is not a frame of ``size`` bytes."""
    fixed = bytearray(min(size, _FIXED.size))
    if not _preads.read_into(readinto, memoryview(fixed), None, chunk):
        return None
    if len(fixed) < _FIXED.size or fixed[:4] != MAGIC:
        raise IntegrityError("not an fncache entry (bad magic or truncated header)")
    _, flags, _, _, plen, nbuf, _ = _FIXED.unpack_from(fixed)
    body = _body_offset(flags, nbuf)
    if body > size:
        raise IntegrityError("truncated entry header")
    prefix = bytearray(body)
    prefix[: _FIXED.size] = fixed
    if not _preads.read_into(readinto, memoryview(prefix)[_FIXED.size :], None, chunk):
        return None
    expected = frame_size(prefix)
    if expected is not None and expected != size:
        raise IntegrityError(f"entry is {size} bytes, its header says {expected}")
    return prefix, flags, plen, nbuf


def _read_checked(readinto: Callable[[memoryview], int | None], prefix: bytearray, key: str,
                  flags: int, plen: int, nbuf: int, chunk: int, fd: int | None) -> ReadFrame | Any:
    """The rest of an uncompressed frame with out-of-band buffers after its ``prefix``, hashed
    for ``key`` as it is read: a :class:`ReadFrame` if its checksums match, else one unchecked
    buffer; None if the source ran dry."""
    body = len(prefix)
    head_end = body + plen + _pad(plen)
    head = _preads.allocate(head_end)
    view = memoryview(head).cast("B")
    view[:body] = prefix
    header_end = _FIXED.size + 8 * nbuf
    lens = struct.unpack_from(f"<{nbuf}Q", view, _FIXED.size)
    hasher = xxhash.xxh3_128(key.encode())
    hasher.update(view[:header_end])
    if not _preads.read_into(readinto, view[body:], hasher, chunk):
        return None
    at_head = hasher.digest()
    rest = _read_buffers(readinto, lens, hasher, chunk, fd)
    if rest is None:
        return None
    trailer = view[header_end : header_end + 2 * _CHECK]
    padding = view[header_end + 2 * _CHECK + (_MAC if flags & _SIGNED else 0) : body]
    if hasher.digest() + at_head == trailer and padding == bytes(padding.nbytes):
        return ReadFrame(key, head, rest)
    return bytearray(b"".join([view, *[memoryview(p).cast("B") for p in rest]]))


def _read_buffers(readinto: Callable[[memoryview], int | None], lens: tuple[int, ...],
                  hasher: Any, chunk: int, fd: int | None) -> list[Any] | None:
    """Each out-of-band buffer of the given lengths and its padding, read and fed to ``hasher``
    (on two threads from ``fd``, if given, when they are large); None if the source ran dry."""
    rest = [part for n in lens for part in (_preads.allocate(n), bytearray(_pad(n)))]
    views = [memoryview(part).cast("B") for part in rest]
    if fd is not None and sum(lens) >= _preads.MIN_BYTES and _preads.available():
        return rest if _preads.fill(fd, views, hasher) else None
    return rest if all(_preads.read_into(readinto, view, hasher, chunk) for view in views) else None


def _read_rest(prefix: memoryview, readinto: Callable[[memoryview], int | None], size: int,
               chunk: int) -> Any:
    """``prefix`` (read already) and the rest of a ``size``-byte source as one unchecked
    buffer; None if the source ran dry."""
    whole = _preads.allocate(size)
    view = memoryview(whole).cast("B")
    view[: prefix.nbytes] = prefix
    return whole if _preads.read_into(readinto, view[prefix.nbytes :], None, chunk) else None


def decode(
    frame: Any, key: str, *, secret: Secrets = None, verify_buffers: bool = True
) -> tuple[Any, Header]:
    """``(value, header)`` from a frame stored under ``key``.

    The checksum (and, with ``secret``, the MAC) is verified before unpickling (``secret`` may be
    several, a rotation: a MAC under any of them is accepted); any mismatch, truncation
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
    if type(frame) is bytes and not secret:
        small = decode_small(frame, key)
        if small is not None:
            return small  # type: ignore[return-value]  # (made with its header)
    elif type(frame) is ReadFrame:
        if frame.checked_for == key:
            return _decode_read(frame, key, secret)
        frame = bytes(frame)  # checked for another key: checked again below (and rejected)
    head, rest, h, flags, header_end = _split(frame)
    pickled, buffers = _verified_body(head, rest, h, flags, header_end, key.encode(), secret,
                                      verify_buffers)
    return _load(frame, h, pickled, buffers), h


# Where the body of a frame with no flags and no buffers starts: the fixed header, its checksum and
# zero padding to 64 bytes.
_PLAIN_BODY = _FIXED.size + _CHECK + _pad(_FIXED.size + _CHECK)
_PLAIN_PADDING = bytes(_PLAIN_BODY - _FIXED.size - _CHECK)
_HEAD_LEN = _FIXED.size
# Such a frame's first _PLAIN_BODY bytes in one unpack: the fixed header, its checksum, the padding.
_PLAIN_HEAD = struct.Struct(f"{_FIXED.format}{_CHECK}s{len(_PLAIN_PADDING)}s")
_COPY_UNDER = 4096


# Header(...) without the named tuple's Python-level __new__ (one call less per hit).
_new_header: Callable[[tuple[Any, ...]], Header] = functools.partial(tuple.__new__, Header)


def decode_small(frame: bytes, key: str, header: bool = True) -> tuple[Any, Header | None] | None:
    """:func:`decode` of the commonest frame (a small result: unsigned, uncompressed, no buffers) in
    one step: the general path's checks (magic, exact size, zero padding, the checksum over key,
    header and body) before unpickling; None for another frame or a failed check (then the general
    path names what failed). Only for readers that accept unsigned frames (no secret). With
    ``header=False`` the header is not made (a reader with no policy to ask about it: None)."""
    if len(frame) < _PLAIN_BODY:
        return None
    magic, flags, created, duration, plen, nbuf, _, check, padding = _PLAIN_HEAD.unpack_from(frame)
    if magic != MAGIC or flags or nbuf or padding != _PLAIN_PADDING \
            or len(frame) != _PLAIN_BODY + plen + (-plen % _ALIGN) \
            or xxhash.xxh3_128_digest(b"".join((key.encode(), frame[:_HEAD_LEN],
                                                frame[_PLAIN_BODY:]))) != check:
        return None
    # A short pickle is copied out (cheaper than a view), a longer one is read in place.
    body = frame[_PLAIN_BODY : _PLAIN_BODY + plen] if plen <= _COPY_UNDER \
        else memoryview(frame)[_PLAIN_BODY : _PLAIN_BODY + plen]
    return pickle.loads(body), (_new_header((created, duration, False, None, plen, (), _PLAIN_BODY))
                                if header else None)


def verify(key: str, frame: Any, *, secret: Secrets = None) -> bool:
    """Whether ``frame`` passes every check :func:`decode` makes before unpickling, for ``key``.

    Nothing is unpickled or decompressed: this is the verification half of :func:`decode`, for
    code that moves frames between stores (a tiered store filling its near tier) and must never
    move one that a read would reject.
    """
    try:
        if type(frame) is ReadFrame:
            if frame.checked_for == key:
                _read_body(frame, key, secret)
                return True
            frame = bytes(frame)
        head, rest, h, flags, header_end = _split(frame)
        pickled, buffers = _verified_body(head, rest, h, flags, header_end, key.encode(), secret,
                                          True)
    except IntegrityError:
        return False
    # A compressed body's length is known only once decompressed (decode checks it then).
    return bool(h.compression) or pickled.nbytes + buffers.nbytes >= _body_length(h)


def _body_length(h: Header) -> int:
    """Bytes an uncompressed body holds: the pickle and each buffer, each padded."""
    if not h.buffer_lens:
        return h.pickle_len
    return h.pickle_len + _pad(h.pickle_len) + sum(n + _pad(n) for n in h.buffer_lens)


def _split(frame: Any) -> tuple[memoryview, memoryview, Header, int, int]:
    """(head, buffers, header, flags, end of the buffer-length table) of a frame.

    ``head`` is the header, trailer and body up to the end of the pickle (and its padding) of an
    uncompressed frame with out-of-band buffers, the whole frame otherwise; ``buffers`` the rest.
    Everything that is checked and then unpickled or decompressed comes from ``head``, which for a
    memory map (a file that others may be able to write) is a private copy taken before any
    check: a writer of the file cannot change what runs after it was verified. Only the mapped
    out-of-band buffers stay shared; they are raw bytes, never unpickled (see ``decode``).
    """
    view = memoryview(frame).cast("B")
    h, flags, header_end = _parse(view)
    expected = _size_of(h)
    if expected is not None and expected != view.nbytes:
        raise IntegrityError(f"entry is {view.nbytes} bytes, its header says {expected}")
    end = _head_end(h, flags, view.nbytes)
    if isinstance(frame, _MAPPED_TYPES):
        try:
            head = memoryview(bytes(view[:end]))
        except MemoryError:
            raise IntegrityError(f"entry too large to load ({end} bytes of pickle)") from None
        # Parsed again from the private copy: the header read from the map may have changed since.
        h, flags, header_end = _parse(head)
        if _head_end(h, flags, view.nbytes) != end:
            raise IntegrityError("entry changed while it was read")
    else:
        head = view[:end]
    return head, view[end:], h, flags, header_end


def _head_end(h: Header, flags: int, size: int) -> int:
    """Where the part of a ``size``-byte frame that is unpickled (or decompressed) ends."""
    if flags & _HEADCHECK and not h.compression and h.buffer_lens:
        return min(size, h.body_offset + h.pickle_len + _pad(h.pickle_len))
    return size


def _verified_body(head: memoryview, rest: memoryview, h: Header, flags: int, header_end: int,
                   kb: bytes, secret: Secrets,
                   verify_buffers: bool) -> tuple[memoryview, memoryview]:
    """(body in ``head``, buffers) of a frame whose padding, signature and checksums were checked
    (see decode); ``head`` and ``rest`` as :func:`_split` gives them."""
    header = head[:header_end]
    check = head[header_end : header_end + _CHECK]
    mac_at = header_end + (2 * _CHECK if flags & _HEADCHECK else _CHECK)
    # The padding before the body is not hashed: it must be zero, so that no byte of a frame can
    # change unnoticed (a frame cut short here fails its checksum below instead).
    padding = head[mac_at + (_MAC if flags & _SIGNED else 0) : h.body_offset]
    if padding != bytes(padding.nbytes):
        raise IntegrityError("entry header padding is not zero (corrupted)")
    body = head[h.body_offset :]
    if secret:
        if not h.signed:
            raise IntegrityError("entry is not signed, but a secret is configured")
        _check_mac(bytes(head[mac_at : mac_at + _MAC]), secret, kb, header, [body, rest])
    if flags & _HEADCHECK:
        if not verify_buffers:
            ok = _checksum(kb, header, [body]) == head[mac_at - _CHECK : mac_at]
        else:
            full, at_head = _checksums(kb, header, body, [rest])
            ok = full == check and at_head == head[mac_at - _CHECK : mac_at]
    else:
        ok = _checksum(kb, header, [body, rest]) == check
    if not ok:
        raise IntegrityError("entry checksum does not match (corrupted or truncated)")
    return body, rest


def _load(frame: Any, h: Header, body: memoryview, rest: memoryview) -> Any:
    """Unpickle a verified body (``body``: the pickle, or the whole body of a frame without
    buffers; ``rest``: the out-of-band buffers): decompressed, or with its buffers in place
    (copied once if the frame is read-only bytes, so the arrays are writable)."""
    if h.compression:
        try:
            data: Any = memoryview(bytearray(decompress_body(h.compression, body)))
        except Exception as e:
            raise IntegrityError(f"entry does not decompress: {e}") from e
        if data.nbytes < _body_length(h):
            raise IntegrityError("entry body is shorter than its header says")
        if not h.buffer_lens:
            return pickle.loads(data[: h.pickle_len])
        body, rest = data[: h.pickle_len + _pad(h.pickle_len)], data[h.pickle_len + _pad(h.pickle_len):]
    elif body.nbytes + rest.nbytes < _body_length(h):
        raise IntegrityError("entry body is shorter than its header says")
    if not h.buffer_lens:
        return pickle.loads(body[: h.pickle_len])
    if rest.readonly and not isinstance(frame, _MAPPED_TYPES):
        rest = memoryview(bytearray(rest))
    buffers = []
    pos = 0
    for n in h.buffer_lens:
        buffers.append(rest[pos : pos + n])
        pos += n + _pad(n)
    return pickle.loads(body[: h.pickle_len], buffers=buffers)


def _decode_read(frame: ReadFrame, key: str, secret: Secrets) -> tuple[Any, Header]:
    """:func:`decode` of a frame that :func:`read_frame` checked for ``key``: its MAC (with a
    secret) is checked, then it is unpickled with its buffers used in place."""
    h, body, rest = _read_body(frame, key, secret)
    return pickle.loads(body[: h.pickle_len], buffers=rest[0::2]), h


def _read_body(frame: ReadFrame, key: str,
               secret: Secrets) -> tuple[Header, memoryview, list[memoryview]]:
    """(header, body, buffers and their padding) of a frame :func:`read_frame` checked for
    ``key``, after checking its MAC with a secret."""
    head = memoryview(frame.head).cast("B")
    h, _, header_end = _parse(head)
    body = head[h.body_offset :]
    rest = [memoryview(p).cast("B") for p in frame.rest]
    if secret:
        if not h.signed:
            raise IntegrityError("entry is not signed, but a secret is configured")
        mac_at = header_end + 2 * _CHECK
        _check_mac(bytes(head[mac_at : mac_at + _MAC]), secret, key.encode(), head[:header_end],
                   [body, *rest])
    return h, body, rest


# Memory maps are used in place even when read-only: a file's map is never written through.
_MAPPED_TYPES: tuple[type, ...] = (mmap.mmap,)
