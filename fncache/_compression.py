"""The codec's compressors (``compress=``): zstd and lz4, imported only when a frame uses one."""

from __future__ import annotations

from typing import Any

from fncache._errors import ConfigError

__all__ = ["COMPRESSORS", "check_compress", "compress_body", "decompress_body"]

COMPRESSORS = ("zstd", "lz4")


def compress_body(kind: str, data: bytes) -> bytes:
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    import lz4.frame

    return lz4.frame.compress(data)  # type: ignore[no-any-return]


def decompress_body(kind: str, data: memoryview) -> bytes:
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
