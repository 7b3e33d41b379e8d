"""What differs between a call (or the current code) and a stored entry, in words.

Both sides are read in the terms an entry's metadata records (:class:`Side`: the digest of each
fingerprint component, of each argument, the Python version, a pinned ``version`` and the
``depends_on`` digest); :func:`differences` lists each :class:`Difference` ("helper `normalize`
changed", "argument `df` changed"), and :func:`with_texts` adds the changed source lines and shown
values where both sides know them (:class:`Texts`). Used by :mod:`fncache._explain` (which entry is
nearest, and the report) and :mod:`fncache._verbose` (a miss line's reason); it imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fncache.code import sources as _sources

__all__ = ["Difference", "Side", "Texts", "compare_components", "differences", "with_texts"]


# ---------------------------------------------------------------------------------------------
# Differences
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    """One thing that differs between a call (or the current code) and a stored entry.

    ``kind`` is one of ``function`` (the cached function itself: code or defaults), ``helper``,
    ``method``, ``class``, ``global``, ``closure``, ``attribute`` (``module.NAME``), ``library``
    (a distribution's version, with ``track_versions``), ``callable``, ``argument``, ``python``,
    ``version`` (the pinned ``version=``), ``depends_on`` or ``unrecorded``. ``old`` and ``new``
    are digests (hex), or plain values for ``python`` and ``version``; ``None`` where absent.
    """

    kind: str
    name: str
    old: str | None
    new: str | None
    #: for a changed function, helper or method: its source's changed lines (``-`` old, ``+`` new)
    #: where both versions' sources are known (see :mod:`fncache.code.sources`)
    diff: tuple[str, ...] = ()
    #: for a changed global: how the old and the new value read (``("0.5", "0.7")``)
    shown: tuple[str, str] | None = None

    @property
    def change(self) -> str:
        """``"changed"``, ``"added"`` (only in the call) or ``"removed"`` (only in the entry)."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "changed"

    def __str__(self) -> str:
        if self.kind == "unrecorded":
            return self.name
        what = _DESCRIBE.get(self.kind, "{kind} `{name}`").format(kind=self.kind, **_split(self))
        if self.kind == "python":
            return (f"written by Python {self.old!s} (this is Python {self.new!s}): keys include the "
                    "interpreter's version, so a Python upgrade starts the cache afresh")
        if self.kind == "version":
            return f"{what} changed ({self.old!s} -> {self.new!s})"
        if self.shown is not None and self.change == "changed":
            return f"{what} changed: {self.shown[0]} -> {self.shown[1]}"
        if self.change == "added":
            return f"{what} is new (not in the stored entry)"
        if self.change == "removed":
            return f"{what} is no longer used"
        return f"{what} changed"


_DESCRIBE = {
    "function": "function `{name}` (its code, defaults or decorators)",
    "helper": "helper `{name}`",
    "method": "method `{name}`",
    "class": "class `{name}` (attributes, bases or metaclass)",
    "global": "global `{name}`",
    "closure": "closure variable `{var}` of `{owner}`",
    "attribute": "attribute `{name}`",
    "library": "version of `{name}`",
    "callable": "callable `{name}`",
    "argument": "argument `{name}`",
    "python": "Python version",
    "version": "pinned version",
    "depends_on": "a `depends_on` input",
}


def _split(d: Difference) -> dict[str, str]:
    owner, _, var = d.name.rpartition(".")
    return {"name": d.name, "owner": owner, "var": var}


_LABEL_KINDS = {"global": "global", "closure": "closure", "class": "class", "attr": "attribute",
                "version": "library", "callable": "callable"}


def _component_kind(label: str, root: str | None, classes: set[str]) -> tuple[str, str]:
    """(kind, name) of a fingerprint component label such as ``"function normalize"``."""
    kind, _, name = label.partition(" ")
    if not name:
        return "component", label
    if kind == "function":
        # functools.wraps gives a decorator's wrapper the name of the function it wraps: the
        # wrapped function itself is then labelled ``NAME#2``.
        if name == root or name.rpartition("#")[0] == root:
            return "function", root
        owner = name.rpartition(".")[0]
        if owner and owner in classes:
            return "method", name
        return "helper", name
    return _LABEL_KINDS.get(kind, kind), name


def compare_components(old: Mapping[str, str], new: Mapping[str, str],
                        root: str | None) -> list[Difference]:
    classes = {label.partition(" ")[2] for label in (*old, *new) if label.startswith("class ")}
    out = []
    for label in sorted(set(old) | set(new)):
        a, b = old.get(label), new.get(label)
        if a != b:
            kind, name = _component_kind(label, root, classes)
            out.append(Difference(kind, name, a, b))
    # The function itself first, then its helpers and values, in label order.
    out.sort(key=lambda d: d.kind != "function")
    return out


# ---------------------------------------------------------------------------------------------
# What a call or the current code looks like, in the terms entries are stored in
# ---------------------------------------------------------------------------------------------

@dataclass
class Side:
    """The recorded facets of a call (or of an entry)."""

    components: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] | None = None
    python: str | None = None
    version: str | None = None
    depends_on: str | None = None

    @classmethod
    def of_entry(cls, meta: Mapping[str, Any]) -> Side:
        """The side an entry's metadata records. Metadata is read from the store, so it is untrusted:
        only text labels and digests are kept, anything else reads as absent (never an exception)."""
        comps = meta.get("components")
        args = meta.get("args")
        return cls(
            components=_text_items(comps) or {},
            args=_text_items(args),
            python=_text(meta.get("python")),
            version=_text(meta.get("version")),
            depends_on=_text(meta.get("depends_on")),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_items(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def differences(entry: Side, now: Side, root: str | None) -> list[Difference]:
    """What differs from ``entry`` to ``now``: the Python version alone when it differs, else the
    pinned version, the code's components (without a pinned version), depends_on and arguments.
    ``root``: the function's qualname (its own component reads as ``function``)."""
    if entry.python and now.python and entry.python != now.python:
        # Bytecode and the pickles of library types differ between interpreters: every component
        # would read as changed, and none of them is the reason (docs: "Python versions").
        return [Difference("python", "python", entry.python, now.python)]
    out: list[Difference] = []
    if entry.version != now.version:
        out.append(Difference("version", "version", entry.version, now.version))
    if now.version is None and entry.version is None:
        out.extend(compare_components(entry.components, now.components, root))
    if entry.depends_on != now.depends_on:
        out.append(Difference("depends_on", "depends_on", entry.depends_on, now.depends_on))
    if now.args is not None and entry.args is not None:
        out.extend(_argument_differences(entry.args, now.args))
    return out


def _argument_differences(old: Mapping[str, str], new: Mapping[str, str]) -> list[Difference]:
    """The arguments whose digests differ: the call's in its order, then those only the entry has."""
    names = list(new) + [n for n in old if n not in new]
    return [Difference("argument", n, old.get(n), new.get(n)) for n in names if old.get(n) != new.get(n)]


class Texts:
    """Where one side's sources and shown values come from: an entry's metadata (its sources read
    from the store and checked against their addresses) or the current code's fingerprint."""

    def __init__(self, store: Any, secret: Any, meta: Mapping[str, Any] | None = None,
                 fp: Any = None) -> None:
        self.store, self.secret = store, _sources.signing_key(secret)
        self.meta, self.fp = meta or {}, fp

    def source(self, label: str) -> str | None:
        if self.fp is not None:
            return _sources.source_of(dict(self.fp.functions).get(label))
        refs = self.meta.get("sources")
        return _sources.read(self.store, refs.get(label), self.secret) if isinstance(refs, dict) else None

    def shown(self, label: str) -> str | None:
        if self.fp is not None:
            return dict(self.fp.shown).get(label)
        values = self.meta.get("shown")
        found = values.get(label) if isinstance(values, dict) else None
        # Metadata is untrusted: only short text is shown, escaped by whoever prints it.
        return found if isinstance(found, str) and len(found) <= 200 else None


def with_texts(diffs: list[Difference], old: Texts, new: Texts) -> list[Difference]:
    """``diffs`` with the changed lines of each changed function and both values of each changed
    global, where both sides know them."""
    return [_with_text(d, old, new) if d.change == "changed" else d for d in diffs]


def _with_text(d: Difference, old: Texts, new: Texts) -> Difference:
    if d.kind in ("function", "helper", "method"):
        a, b = old.source(f"function {d.name}"), new.source(f"function {d.name}")
        if a is not None and b is not None and a != b:
            return replace(d, diff=_sources.diff_lines(a, b))
    elif d.kind == "global":
        a, b = old.shown(f"global {d.name}"), new.shown(f"global {d.name}")
        if a is not None and b is not None:
            return replace(d, shown=(a, b))
    return d
