"""A griffe extension for the API reference: reST roles in docstrings become Markdown code.

fncache's docstrings are read in a terminal (``help()``) as much as on the site, so they use reST's
``:class:`~fncache.Store``` and double backticks. Markdown renders double backticks as code already;
this turns a role into code showing the name as Sphinx would (``~`` keeps the last part only).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const):`(~?)([^`]+)`")


def _code(m: re.Match[str]) -> str:
    name = m.group(2)
    return f"`{name.rsplit('.', 1)[-1] if m.group(1) else name}`"


class RestRoles(griffe.Extension):
    """Rewrite reST roles in every docstring before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
