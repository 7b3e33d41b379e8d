"""Unsound mutants the oracle expects today, by cause: empty this table as the fixes land.

Each entry names a corpus program, a file (or ``"*"``), the qualified name of the function (or
class, or ``"<module>"`` for module-level assignments, or ``"*"``) whose mutations may keep their key
although the output changes, optionally a text the mutated line must contain (to single out one
module-level assignment), and the cause: an open item of the key-soundness issue. An entry with
``path`` and ``function`` both ``"*"`` also covers a program whose original cannot be keyed at all.
The full run fails on entries that no longer match anything, so a fixed hole's entry is removed.
"""

from __future__ import annotations

from typing import NamedTuple

SINGLEDISPATCH = "singledispatch: the functools wrapper is fingerprinted, not the user's implementations"
LAZY_IMPORT = "imports inside the function body are not followed"
ENUM_METHODS = "enum special methods the user wrote (__str__, __format__, __init__, _missing_) are skipped"
FUNCTION_ATTRIBUTES = "a function attribute (helper.factor) is not part of the helper"
ABC_CRASH = "classes derived from abc.ABC cannot be keyed (_abc_data is unpicklable)"
MODULE_GETATTR = "a module-level __getattr__ (PEP 562) and the table it serves are not followed"
UNPICKLABLE_GLOBALS = "unpicklable infrastructure (a lock, functools.cached_property on 3.11) cannot be keyed"


class KnownHole(NamedTuple):
    program: str
    path: str
    function: str
    cause: str
    where: str = ""   # a text of the original line the mutation is on; "" for any line


KNOWN_HOLES: list[KnownHole] = [
    KnownHole("dispatch", "render.py", "render", SINGLEDISPATCH),
    KnownHole("dispatch", "render.py", "_", SINGLEDISPATCH),
    KnownHole("dispatch", "render.py", "_render_str", SINGLEDISPATCH),
    KnownHole("dispatch", "render.py", "_render_list", SINGLEDISPATCH),
    KnownHole("dispatch", "render.py", "<module>", SINGLEDISPATCH, where='INDENT = "  "'),
    KnownHole("records", "models.py", "Serializer._", SINGLEDISPATCH + " (singledispatchmethod)",
              where="return f\"{value:."),
    KnownHole("lazy_package", "lazypkg/fmt.py", "as_text", LAZY_IMPORT),
    KnownHole("lazy_package", "lazypkg/stats.py", "spread", LAZY_IMPORT),
    KnownHole("lazy_package", "lazypkg/stats.py", "scale", LAZY_IMPORT),
    KnownHole("lazy_package", "lazypkg/stats.py", "<module>", LAZY_IMPORT, where="FACTOR = 2"),
    KnownHole("enums", "kinds.py", "Color.__str__", ENUM_METHODS),
    KnownHole("enums", "kinds.py", "Size._missing_", ENUM_METHODS),
    KnownHole("enums", "kinds.py", "Unit.__init__", ENUM_METHODS),
    KnownHole("enums", "kinds.py", "Unit.__format__", ENUM_METHODS),
    KnownHole("dispatch_table", "inventory.py", "<module>", FUNCTION_ATTRIBUTES, where="_scale.factor = 2"),
    KnownHole("settings_getattr", "settings.py", "__getattr__", MODULE_GETATTR),
    KnownHole("settings_getattr", "settings.py", "<module>", MODULE_GETATTR, where="_DEFAULTS = "),
    KnownHole("estimators", "*", "*", ABC_CRASH),
    KnownHole("locked_cache", "*", "*", UNPICKLABLE_GLOBALS),
]
