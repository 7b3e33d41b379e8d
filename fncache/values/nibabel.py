"""nibabel's lazy images: an array proxy is keyed by the content of the file it reads.

``nibabel.load`` returns an image whose data is an *array proxy*: the file's name and the layout
(shape, dtype, offset, scaling), none of the data. Its pickle is that name, so an image file
rewritten in place would keep its key and return the old result. Here the proxy's file name is
replaced by the digest of the file's bytes (the size/mtime-cached digest ``fncache.file`` uses) and
the rest of its state is kept. The digest is taken when the key is made, as for ``fncache.file``.

A proxy over an open file object (an image built from a ``file_map`` of streams) is refused, as
every open stream is (see ``_files``): reading it to key it would consume it.
"""

from __future__ import annotations

import os
from typing import Any

from fncache.values.registry import register_lazy, register_type, token

__all__ = ["is_proxy", "proxy_handler"]


def is_proxy(t: type) -> bool:
    """Whether ``t`` is one of nibabel's file-backed array proxies (``ArrayProxy``,
    ``PARRECArrayProxy``, and subclasses defined in nibabel)."""
    return t.__module__.startswith("nibabel.") and any(
        b.__name__.endswith("ArrayProxy") and b.__module__.startswith("nibabel.") for b in t.__mro__)


def proxy_handler(h: Any, obj: Any) -> Any:
    """The proxy's state with its file name replaced by the file's content digest."""
    from fncache.values.digests import path_digest

    getstate = getattr(obj, "__getstate__", None)
    state = getstate() if getstate is not None else None
    if not isinstance(state, dict):
        state = dict(vars(obj))
    state = {k: v for k, v in state.items() if k != "_lock"}  # a lock is not content
    source = state.get("file_like")
    if isinstance(source, (str, os.PathLike)):
        state["file_like"] = ("file content", path_digest(source))
    # Anything else (an open file) is hashed as it is: open streams are refused with a hint.
    return token("nibabel array proxy", type(obj), tuple(sorted(state.items())))


def _proxy_token(h: Any, obj: Any) -> Any:
    return proxy_handler(h, obj) if is_proxy(type(obj)) else NotImplemented


@register_lazy("nibabel")
def _register() -> None:
    from nibabel import arrayproxy, ecat, minc1, parrec

    roots = (arrayproxy.ArrayProxy, parrec.PARRECArrayProxy, minc1.MincImageArrayProxy,
             ecat.EcatImageArrayProxy)  # nibabel's proxy classes that subclass no other
    register_type(roots, _proxy_token, not_content=(
        ("_lock", "a lock is not content"),
        ("file_like as a name", "replaced by the file's content digest"),
    ))
