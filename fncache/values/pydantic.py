"""Keys for pydantic values that are not models: a ``TypeAdapter`` by what it was made from.

A ``TypeAdapter`` keeps the core schema, validator and serializer pydantic builds from its type, and
the schema names each model class by ``id()`` (``'ref': 'mod.M:9387...'``): a global
``TypeAdapter(list[User])`` gave every process a new key for every function that reads it, which
then never hit. It is keyed as what it was made from: its type (a model in it by its class's code,
see ``fncache.code.classify.PYDANTIC_DERIVED``), its config, and the module and frame depth its
forward references resolve in. An adapter whose type names a type by a string (``list["User"]``),
resolved where it was made, and a version of pydantic whose adapters keep other state, are keyed
through their pickle, as before.
"""

from __future__ import annotations

import typing
from typing import Any

from fncache.values.registry import register_lazy, register_type, token

__all__: list[str] = []

#: Every attribute an adapter keeps (pydantic 2.x): what it is made from, then what is built from it.
_MADE_FROM = ("_type", "_config", "_parent_depth", "_module_name")
_BUILT = frozenset({"core_schema", "validator", "serializer", "pydantic_complete"})


def _type_adapter_token(h: Any, adapter: Any) -> Any:
    state = vars(adapter)
    if not set(_MADE_FROM) <= state.keys() or not _BUILT.issuperset(state.keys() - set(_MADE_FROM)):
        return NotImplemented  # state this handler does not know: its pickle keys it
    if _forward_ref(state["_type"]):
        # ``TypeAdapter("list[Item]")``, ``list["User"]``: the names were looked up where the
        # adapter was made (a function's locals, a class since redefined), which its type does not
        # say; what they resolved to is in its schema: its pickle keys it.
        return NotImplemented
    return token("pydantic.TypeAdapter", *(state[name] for name in _MADE_FROM))


def _forward_ref(tp: Any, depth: int = 0) -> bool:
    """Whether type ``tp`` names a type by a string anywhere in it (or nests too deep to tell)."""
    if isinstance(tp, (str, typing.ForwardRef)) or depth > 32:
        return True
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Annotated:
        args = args[:1]  # the rest is metadata, not types
    return any(_forward_ref(arg, depth + 1) for arg in args)


@register_lazy("pydantic")
def _register() -> None:
    from pydantic import TypeAdapter

    register_type(TypeAdapter, _type_adapter_token, exact=True, not_content=(
        ("core_schema, validator, serializer, pydantic_complete",
         "built from the type and config; the schema names model classes by id()"),
    ))
