"""Canonical keys for geopandas geometry arrays: the geometries and the CRS.

A GeoDataFrame or GeoSeries is a pandas frame or series (see :mod:`fncache.values.pandas`: its class
enters by its code) whose geometry column is a ``GeometryArray``. The array's pickle is its
geometries as WKB and its CRS, so it is keyed as:

* its class (geopandas' own by name, a user's subclass by its code);
* each geometry's WKB bytes (``None`` for a missing geometry) in order;
* for each geometry whose WKB holds the NaN that WKB writes for an empty point, its WKT too, with
  its position: WKB writes ``POINT EMPTY`` as a point at (NaN, NaN), also inside a collection, so
  ``Point()`` and ``Point(nan, nan)`` have one WKB, where ``is_empty`` tells them apart (and so does
  the WKT). geopandas' pickle conflates them (an unpickled NaN point is empty); a key must not, as
  the function is called with the geometries themselves. Geometries without that NaN keep the key
  they had;
* the CRS as its WKT (every parameter: EPSG:4326 and EPSG:3857 differ; no CRS is ``None``), so a CRS
  spelled ``"EPSG:4326"`` and one given as its full definition are one key.

Not content, by declaration: the spatial index (``sindex``), a cache built from the geometries.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from fncache.values.buffers import class_token
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["geometry_array_token"]


def geometry_array_token(a: Any) -> tuple[Any, ...]:
    """A GeometryArray as described in the module docstring."""
    import shapely  # type: ignore[import-untyped]

    kind = class_token(type(a), "geopandas")
    geoms = a._data  # noqa: SLF001 - what the array pickles
    blobs = shapely.to_wkb(geoms, include_srid=True).tolist()
    crs = None if a.crs is None else a.crs.to_wkt()
    extra = tuple(sorted((k, v) for k, v in vars(a).items() if k not in _ARRAY_STATE))
    head = (kind, blobs, crs, extra)
    empties = _empty_or_nan(shapely, geoms, blobs)
    return (*head, empties) if empties else head


def _empty_or_nan(shapely: Any, geoms: Any, blobs: list[bytes | None]) -> tuple[Any, ...]:
    """(position, WKT) of each geometry whose WKB holds the NaN of an empty point."""
    if _EMPTY_NAN not in b"".join(b for b in blobs if b is not None):  # one search in C
        return ()
    at = [i for i, b in enumerate(blobs) if b is not None and _EMPTY_NAN in b]
    # (none: the bytes matched across two geometries only)
    return tuple(zip(at, shapely.to_wkt(geoms[at]).tolist(), strict=True)) if at else ()


# The coordinate WKB writes for an empty point (GEOS's NaN, little- or big-endian as the WKB is):
# a geometry holding it is keyed by its WKT too (see the module docstring).
_EMPTY_NAN = struct.pack("<d", float("nan")) if sys.byteorder == "little" \
    else struct.pack(">d", float("nan"))

# What a GeometryArray's ``__dict__`` holds (keyed above or a cache); anything else counts.
_ARRAY_STATE = frozenset({"_data", "_crs", "_sindex"})


@register_lazy("geopandas")
def _register() -> None:
    from geopandas.array import GeometryArray  # type: ignore[import-untyped]

    register_type(GeometryArray, guarded(geometry_array_token), not_content=(
        ("_sindex", "the spatial index: a cache built from the geometries"),
    ))
