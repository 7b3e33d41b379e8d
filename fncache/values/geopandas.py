"""Canonical keys for geopandas geometry arrays (the geometries and the CRS) and shapely geometries.

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
  spelled ``"EPSG:4326"`` and one given as its full definition are one key;
* what a geometry holds that its WKB does not, with its position (a path into multi-linestrings
  and collections, whose parts keep their own type and grid): a ``LinearRing``, which WKB writes
  as a ``LineString`` (``geom_type``, ``is_ring`` and shapely's own pickle tell them apart), and a
  precision grid (``shapely.set_precision``: later operations snap their results to it), which no
  pickle keeps. Geometries without either keep the key they had. A grid set on the parts of a
  multi-point or multi-polygon alone (not on the whole) is not searched for: every part of every
  such geometry would be copied out to look (a key of 200,000 multi-polygons took 2.5 times as long).

A bare shapely geometry is keyed by its own pickle (its WKB), with the same two additions where
it has either (keyed then by its class, WKB and those).

Not content, by declaration: the spatial index (``sindex``), a cache built from the geometries.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from fncache.values.buffers import class_token
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["geometry_array_token", "geometry_token", "not_in_wkb"]


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
    unwritten = not_in_wkb(shapely, geoms)
    if unwritten:
        return (*head, empties, ("not in WKB", unwritten))
    return (*head, empties) if empties else head


def geometry_token(g: Any) -> Any:
    """A bare shapely geometry: NotImplemented (its own pickle, its WKB) unless it holds what WKB
    drops (see the module docstring); then its class, WKB and that."""
    import numpy as np
    import shapely

    kind = shapely.get_type_id(g)
    if kind not in (_LINEAR_RING, _MULTI_LINE, _COLLECTION) and not shapely.get_precision(g) > 0:
        return NotImplemented  # (the commonest case, without an array)
    unwritten = not_in_wkb(shapely, np.array([g], dtype=object))
    if not unwritten:
        return NotImplemented
    return (class_token(type(g), "shapely"), shapely.to_wkb(g, include_srid=True), unwritten)


def not_in_wkb(shapely: Any, geoms: Any) -> tuple[Any, ...]:
    """``(path, type id, grid)`` of each geometry, or part of a multi-geometry or collection at any
    depth (the path gives its position), that is a LinearRing or lies on a precision grid: what
    its WKB does not say. One pass per level of nesting, in shapely's vectorised functions."""
    import numpy as np

    ids = shapely.get_type_id(geoms)
    grids = shapely.get_precision(geoms)  # 0: floating; NaN: a missing geometry
    out: list[Any] = [((int(i),), int(ids[i]), float(grids[i]))
                      for i in np.flatnonzero((ids == _LINEAR_RING) | (grids > 0))]
    # Only these hold a free LinearRing; their parts keep their own type and grid (the whole's
    # grid says 0). (Not searched: a grid set on the parts of a multi-point or -polygon alone.)
    multi = np.flatnonzero((ids == _MULTI_LINE) | (ids == _COLLECTION))
    if multi.size:
        parts, owner = shapely.get_parts(geoms[multi], return_index=True)
        nth = np.arange(len(owner)) - np.searchsorted(owner, owner)  # (owner is sorted)
        out.extend(((int(multi[owner[path[0]]]), int(nth[path[0]]), *path[1:]), kind, grid)
                   for path, kind, grid in not_in_wkb(shapely, parts))
    return tuple(sorted(out))


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

# shapely's type ids (``shapely.get_type_id``) not_in_wkb looks at or into: a ring, and the two
# kinds that can hold one as a part.
_LINEAR_RING, _MULTI_LINE, _COLLECTION = 2, 5, 7

# What a GeometryArray's ``__dict__`` holds (keyed above or a cache); anything else counts.
_ARRAY_STATE = frozenset({"_data", "_crs", "_sindex"})


@register_lazy("geopandas")
def _register() -> None:
    from geopandas.array import GeometryArray  # type: ignore[import-untyped]

    register_type(GeometryArray, guarded(geometry_array_token), not_content=(
        ("_sindex", "the spatial index: a cache built from the geometries"),
    ))


@register_lazy("shapely")
def _register_shapely() -> None:
    from shapely import Geometry

    register_type(Geometry, guarded(geometry_token))
