"""fncache._differences: what differs between a call and a stored entry, as pure functions of both."""

from __future__ import annotations

from fncache._differences import Difference, Side, Texts, differences, with_texts


def _side(**kw):
    base = {"components": {"function f": "aa", "global T": "11"}, "args": {"x": "01"},
            "python": "3.11"}
    base.update(kw)
    return Side.of_entry(base)


def test_no_difference_between_equal_sides():
    """Two sides that record the same digests differ in nothing."""
    assert differences(_side(), _side(), "f") == []


def test_another_python_is_the_only_reason_given():
    """An entry of another interpreter differs in the Python version alone, whatever else differs."""
    diffs = differences(_side(python="3.13", args={"x": "02"}), _side(), "f")
    assert [(d.kind, d.old, d.new) for d in diffs] == [("python", "3.13", "3.11")]
    assert "Python upgrade" in str(diffs[0])


def test_the_function_first_then_its_values_then_arguments():
    """The function's own change comes first, then globals, then arguments in the call's order."""
    entry = _side(components={"function f": "aa", "global T": "11"}, args={"x": "01", "y": "05"})
    now = _side(components={"function f": "bb", "global T": "12"}, args={"y": "06", "x": "02"})
    diffs = differences(entry, now, "f")
    assert [(d.kind, d.name) for d in diffs] == [("function", "f"), ("global", "T"),
                                                ("argument", "y"), ("argument", "x")]


def test_an_argument_only_the_entry_has_is_removed():
    """An argument the entry recorded and the call has not reads as no longer used."""
    diffs = differences(_side(args={"x": "01", "old": "09"}), _side(args={"x": "01"}), "f")
    assert [(d.name, d.change) for d in diffs] == [("old", "removed")]
    assert str(diffs[0]) == "argument `old` is no longer used"


def test_a_pinned_version_hides_the_code_components():
    """With version= pinned on either side, components are not compared: the version is the code."""
    diffs = differences(_side(version="v1"), _side(version="v2", components={}), "f")
    assert [(d.kind, d.old, d.new) for d in diffs] == [("version", "v1", "v2")]


def test_untrusted_metadata_reads_as_absent():
    """Metadata from the store that is not text is dropped, never an exception."""
    side = Side.of_entry({"components": {"function f": 3, 4: "x"}, "args": "no", "python": b"3"})
    assert (side.components, side.args, side.python) == ({}, None, None)


class _Fp:
    def __init__(self, functions=(), shown=()):
        self.functions, self.shown = functions, shown


def test_with_texts_adds_shown_values_of_a_changed_global():
    """A changed global gets both shown values when both sides know them; others are unchanged."""
    old = Texts(None, None, meta={"shown": {"global T": "1"}})
    new = Texts(None, None, fp=_Fp(shown=(("global T", "2"),)))
    diffs = [Difference("global", "T", "11", "12"), Difference("argument", "x", "01", "02")]
    out = with_texts(diffs, old, new)
    assert out[0].shown == ("1", "2") and str(out[0]) == "global `T` changed: 1 -> 2"
    assert out[1] == diffs[1]


def test_with_texts_ignores_long_or_non_text_shown_values():
    """A stored shown value that is not short text is not shown (metadata is untrusted)."""
    old = Texts(None, None, meta={"shown": {"global T": "x" * 500}})
    new = Texts(None, None, fp=_Fp(shown=(("global T", "2"),)))
    out = with_texts([Difference("global", "T", "11", "12")], old, new)
    assert out[0].shown is None
