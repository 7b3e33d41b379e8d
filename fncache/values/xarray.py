"""Canonical keys for xarray objects: their own pickled state, with lazily made state normalised.

An xarray ``Variable`` (and ``IndexVariable``), ``DataArray`` or ``Dataset`` pickles its slots: the
dimensions, the data, the coordinates, the indexes, the name, ``attrs`` and ``encoding``. xarray
creates ``attrs`` and ``encoding`` lazily: ``None`` until something reads them, ``{}`` after, so a
DataArray before and after ``da.x.attrs`` was read, or after ``copy()``, had two keys. Here an
object is keyed by exactly that pickled state (its class by its fingerprint when it is a user's
subclass, the data through its own handler, a numpy array's by its elements), except:

* ``_attrs`` and ``_encoding`` that are ``None`` are keyed as ``{}`` (equal in meaning);
* ``_cache`` (a DataArray's accessor cache) is left out: a cache of objects made from the value.
"""

from __future__ import annotations

from typing import Any

from fncache.values.registry import register_lazy, register_type

__all__: list[str] = []

_LAZY_DICTS = ("_attrs", "_encoding")


def _normalised(state: Any) -> Any:
    if not isinstance(state, dict):
        return state
    out = {k: v for k, v in state.items() if k != "_cache"}
    for name in _LAZY_DICTS:
        if name in out and out[name] is None:
            out[name] = {}
    return out


def _xarray_token(h: Any, obj: Any) -> Any:
    """An xarray object as its pickle, its lazily made dictionaries normalised."""
    rv = obj.__reduce_ex__(5)
    if type(rv) is not tuple or len(rv) < 3:
        return rv
    state = rv[2]
    if isinstance(state, tuple) and len(state) == 2:
        state = (_normalised(state[0]), _normalised(state[1]))
    else:
        state = _normalised(state)
    return (*rv[:2], state, *rv[3:])


@register_lazy("xarray")
def _register() -> None:
    import xarray as xr

    register_type((xr.Variable, xr.DataArray, xr.Dataset), _xarray_token, not_content=(
        ("attrs and encoding made lazily (None, later {})", "equal in meaning: keyed as {}"),
        ("_cache", "a DataArray's accessor cache"),
    ))
