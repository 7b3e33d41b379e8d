"""Render nested values with functools.singledispatch."""

import functools

INDENT = "  "


@functools.singledispatch
def render(value, depth=0):
    return f"{INDENT * depth}?{type(value).__name__}"


@render.register
def _(value: int, depth=0):
    return f"{INDENT * depth}int {value * 2}"


@render.register(str)
def _render_str(value, depth=0):
    return INDENT * depth + "str " + value.upper()


@render.register(list)
def _render_list(value, depth=0):
    lines = [INDENT * depth + "list"]
    for item in value:
        lines.append(render(item, depth + 1))
    return "\n".join(lines)
