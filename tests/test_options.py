"""The options table (``fncache._options.OPTIONS``) and everything derived from or checked against it."""

from __future__ import annotations

import inspect
import pickle
import typing

import pytest

import fncache
from fncache._memoize import Memoized, memoize
from fncache._options import OPTIONS, OptionAttribute, Options

# One invalid value per option; a new option without a row here fails
# test_every_option_has_an_invalid_value_tested.
INVALID = {
    "store": 42,
    "ignore": "n",
    "ignore_globals": ["not an identifier"],
    "files": "path",
    "version": 3,
    "expire": float("nan"),
    "lock": "yes",
    "lock_timeout": 0,
    "secret": b"",
    "signed": 1,
    "compress": "gzip",
    "on_unhashable": "ignore",
    "on_store_error": "ignore",
    "depends_on": "data.csv",
    "track_versions": "no",
    "store_options": "size_limit=1",
    "verbose": 1,
    "mmap_mode": "w+",
}


def _overload_parameters() -> dict[str, inspect.Parameter]:
    """The keywords of memoize's overload with options (the one written out for type checkers)."""
    overloads = typing.get_overloads(memoize)
    with_options = [o for o in overloads if "store" in inspect.signature(o).parameters]
    assert len(with_options) == 1, overloads
    params = dict(inspect.signature(with_options[0]).parameters)
    assert params.pop("func").kind is inspect.Parameter.POSITIONAL_ONLY
    return params


def test_memoize_overload_lists_the_public_options_in_table_order():
    """The typed overload names every public option, in the table's order, keyword-only."""
    params = _overload_parameters()
    assert list(params) == [name for name, row in OPTIONS.items() if row.public]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


def test_memoize_overload_types_are_the_tables():
    """Each keyword of the overload has the type the table declares, and a default."""
    for name, param in _overload_parameters().items():
        assert param.annotation == OPTIONS[name].given, name
        assert param.default is Ellipsis, name


def test_memoized_attributes_are_the_options_the_table_shows():
    """Memoized has one attribute per option the table shows, and no option attribute besides."""
    attributes = {name for name, value in vars(Memoized).items() if isinstance(value, OptionAttribute)}
    assert attributes == {name for name, row in OPTIONS.items() if row.shown}


def test_memoized_attributes_read_the_validated_options():
    """m.<option> is the validated value (names as a sorted list), for every shown option."""
    m = fncache.memoize(store="memory://opts-attrs", ignore=["b", "a"], expire=5, lock=True,
                        version="v1", depends_on=[1])(lambda a, b: a)
    for name, row in OPTIONS.items():
        if row.shown:
            value = getattr(m.options, name)
            expected = list(value) if isinstance(value, tuple) and row.given == "Iterable[str]" else value
            assert getattr(m, name) == expected, name
    assert m.ignore == ["a", "b"] and m.expire == 5 and m.lock is True and m.version == "v1"


def test_docstring_documents_each_public_option_once():
    """memoize's docstring has one entry per public option, from the table's doc."""
    doc = memoize.__doc__ or ""
    for name, row in OPTIONS.items():
        if row.public:
            assert doc.count(f"\n        {name}: ") == 1, name
            assert row.doc.split()[0] in doc
        else:
            assert f"\n        {name}: " not in doc, name


def test_every_option_has_an_invalid_value_tested():
    """This file has an invalid value for every option in the table (and no stale ones)."""
    assert set(INVALID) == set(OPTIONS)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_an_invalid_value_is_refused_naming_the_option(name):
    """Options.make refuses each option's invalid value with a ConfigError naming it."""
    with pytest.raises(fncache.ConfigError, match=name) as info:
        Options.make(**{name: INVALID[name]})
    assert isinstance(info.value, ValueError)


def test_defaults_are_what_make_gives_without_options(monkeypatch):
    """Options.make() gives each option the table's default, validated."""
    monkeypatch.delenv("FNCACHE_SECRET", raising=False)
    monkeypatch.delenv("FNCACHE_VERBOSE", raising=False)
    made = Options.make()
    for name, row in OPTIONS.items():
        if name != "secret":
            assert getattr(made, name) == row.check(row.default), name
    assert made.secret is None and made.accepted == () and made == Options()


def test_unknown_option_is_refused_with_the_nearest_name():
    """A misspelt option is refused by make as by memoize, with a suggestion."""
    with pytest.raises(fncache.ConfigError, match="did you mean 'expire'"):
        Options.make(expir=3)
    with pytest.raises(fncache.ConfigError, match="did you mean 'expire'"):
        fncache.memoize(expir=3)(abs)


def test_pickled_sends_exactly_the_pickled_options(monkeypatch):
    """pickled() holds every pickled option and no secret; make() rebuilds the same options."""
    monkeypatch.delenv("FNCACHE_SECRET", raising=False)
    opts = Options.make(store="memory://opts-pickled", secret="s3cret", ignore=["b", "a"],
                        expire=2.5, depends_on=[3])
    sent = opts.pickled()
    assert set(sent) == {name for name, row in OPTIONS.items() if row.pickled}
    assert "secret" not in sent and sent["signed"] is True
    assert b"s3cret" not in pickle.dumps(sent)
    assert Options.make(**sent).replace(secret=b"s3cret", accepted=(b"s3cret",)) == opts


@pytest.mark.parametrize("limit", [True, -1, 0, 1.5, "1G"])
def test_size_limit_has_one_rule_for_memoize_and_open_store(tmp_path, limit):
    """size_limit is refused alike when configuring a function and when opening a disk store."""
    with pytest.raises(fncache.ConfigError, match="size_limit: expected a positive number") as a:
        fncache.memoize(store=str(tmp_path / "a"), store_options={"size_limit": limit})(abs)
    with pytest.raises(fncache.ConfigError, match="size_limit: expected a positive number") as b:
        fncache.open_store(str(tmp_path / "b"), size_limit=limit)
    assert str(a.value) == str(b.value)


def test_a_positive_size_limit_is_accepted(tmp_path):
    """A positive int of bytes is a valid size_limit in both places."""
    f = fncache.memoize(store=str(tmp_path / "a"), store_options={"size_limit": 10**6})(abs)
    assert f.options.store_options == {"size_limit": 10**6}
    assert fncache.open_store(str(tmp_path / "b"), size_limit=10**6).options["size_limit"] == 10**6
