"""Key soundness for code the result depends on: no stale hit after an edit, no crash on real code.

Each program below is a small user project written to real files. It is run in fresh interpreters:
version 1, version 2 (an edit the result depends on), and version 1 again at the same path, sharing
one store. For every memoized entry point: version 2 must compute its own result (a stale hit would
return version 1's), and version 1 again must get its first key back and hit. Template lines ending
in ``#@v1`` or ``#@v2`` exist only in that version (see tests/fixtures_code/README.md).
"""

from __future__ import annotations

import abc
import collections.abc
import copy
import functools
import json
import logging
import subprocess
import sys
import textwrap
import threading
import types
import typing
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fncache
from fncache.code.fingerprint import fingerprint
from fncache.values import hasher as _hasher

from .helpers import doctor_failed, import_source, last_json, load_harness, run_py, write

harness = load_harness()


# Appended to every program's main.py: run each entry point, report its key, whether the key was in
# the store before the call, and the result (or the error, so one crash does not hide the others).
_FOOTER = '''

if __name__ == "__main__":
    import json as _json
    _out = {}
    for _name, (_fn, _args) in CALLS.items():
        try:
            _key = _fn.key(*_args)
            _hit = _fn.store.contains(_key)
            _out[_name] = {"key": _key, "hit": _hit, "result": repr(_fn(*_args))}
        except Exception as _e:
            _out[_name] = {"error": f"{type(_e).__name__}: {_e}"}
    print(_json.dumps(_out))
'''

PROGRAMS: dict[str, dict[str, str]] = {}

# -- 0b. library-type subclasses and state their pickles keep ------------------------------------
# A user subclass of a library type is keyed by its class's code (editing a method is a miss), and
# what the library's own pickle keeps (a subclass's _metadata, a GeoDataFrame's CRS) is content.
PROGRAMS["library_subclasses"] = {
    "frames.py": """
        import numpy as np
        import pandas as pd


        class Tagged(pd.DataFrame):
            _metadata = ["unit"]

            @property
            def _constructor(self):
                return Tagged

            def scaled(self):
                return self["v"] * 2  #@v1
                return self["v"] * 3  #@v2


        class Flagged(np.ma.MaskedArray):
            def total(self):
                return float(self.sum()) + 1  #@v1
                return float(self.sum()) + 2  #@v2
    """,
    "main.py": """
        import numpy as np

        import fncache
        from frames import Flagged, Tagged


        @fncache.memoize
        def frame_method(df):
            return df.scaled().tolist()


        @fncache.memoize
        def masked_method(a):
            return a.total()


        @fncache.memoize
        def metadata(df):
            return (df["v"] * (1000 if df.unit == "km" else 1)).tolist()


        def tagged(unit):
            df = Tagged({"v": [1, 2]})
            df.unit = unit
            return df


        UNIT = "m"  #@v1
        UNIT = "km"  #@v2


        CALLS = {
            "frame_method": (frame_method, (tagged("m"),)),
            "masked_method": (masked_method, (np.ma.array([1.0, 2.0], mask=[0, 1]).view(Flagged),)),
            "metadata": (metadata, (tagged(UNIT),)),
        }
    """,
}
PROGRAMS["geo_crs"] = {
    "main.py": """
        import geopandas as gpd
        from shapely.geometry import Point

        import fncache


        @fncache.memoize
        def projected(frame):
            return [round(p.x) for p in frame.to_crs("EPSG:3857").geometry]


        CRS = "EPSG:4326"  #@v1
        CRS = "EPSG:32633"  #@v2
        FRAME = gpd.GeoDataFrame({"v": [1]}, geometry=[Point(10.0, 50.0)], crs=CRS)


        CALLS = {"projected": (projected, (FRAME,))}
    """,
}
PROGRAMS["torch_subclass"] = {
    "tensors.py": """
        import torch


        class Scaled(torch.Tensor):
            def doubled(self):
                return (self * 2).sum().item()  #@v1
                return (self * 3).sum().item()  #@v2
    """,
    "main.py": """
        import torch

        import fncache
        from tensors import Scaled


        @fncache.memoize
        def tensor_method(t):
            return t.doubled()


        CALLS = {"tensor_method": (tensor_method, (torch.arange(3.0).as_subclass(Scaled),))}
    """,
}
# Programs that need a library the test extra does not always install (the test skips without it).
_NEEDS = {"torch_subclass": "torch"}

# -- 0. enums whose members are partials of a helper --------------------------------------------
# 3.13 stopped making a bare functools.partial in an enum body a member (it is a plain attribute
# there, a member on 3.11); enum.member() makes one on both. Each shape must follow the helper.
PROGRAMS["enum_partials"] = {
    "ops.py": """
        import enum
        import functools


        def helper(x, k=1):
            return x * k + 1  #@v1
            return x * k + 2  #@v2


        class Op(enum.Enum):
            ONE = enum.member(functools.partial(helper))
            TWO = enum.member(functools.partial(functools.partial(helper), k=2))

            def __call__(self, x):
                return self.value(x)


        class Bare(enum.Enum):
            ONE = functools.partial(helper)
            TWO = 2


        class Pair(enum.Enum):
            ONE = (1, functools.partial(helper))

            def run(self, x):
                return self.value[1](x)
    """,
    "main.py": """
        import fncache
        from ops import Bare, Op, Pair

        BY_NAME = {op.name: op for op in Op}


        @fncache.memoize
        def member_call(x):
            return Op.ONE(x) + Op.TWO(x)


        @fncache.memoize
        def iterate(x):
            return [op(x) for op in Op]


        @fncache.memoize
        def through_dict(x):
            return BY_NAME["TWO"](x)


        @fncache.memoize
        def bare(x):
            one = Bare.ONE
            return one(x) if callable(one) else one.value(x)


        @fncache.memoize
        def tuple_member(x):
            return Pair.ONE.run(x)


        @fncache.memoize
        def member_argument(op, x):
            return op(x)


        CALLS = {
            "member_call": (member_call, (3,)),
            "iterate": (iterate, (3,)),
            "through_dict": (through_dict, (3,)),
            "bare": (bare, (3,)),
            "tuple_member": (tuple_member, (3,)),
            "member_argument": (member_argument, (Op.TWO, 3)),
        }
    """,
}

# -- 1. imports inside the function body -------------------------------------------------------
PROGRAMS["body_imports"] = {
    "mymod.py": """
        def helper(x):
            return x * 2  #@v1
            return x * 3  #@v2
    """,
    "fromdep.py": """
        def helper(x):
            return x + 1  #@v1
            return x + 2  #@v2
    """,
    "nestdep.py": """
        def f(x):
            return x - 5  #@v1
            return x - 6  #@v2
    """,
    "deeppkg/__init__.py": "",
    "deeppkg/inner/__init__.py": "",
    "deeppkg/inner/calc.py": """
        def k(x):
            return x + 100  #@v1
            return x + 200  #@v2
    """,
    "lazypkg/__init__.py": "",
    "lazypkg/sub.py": """
        def h(x):
            return x - 1  #@v1
            return x - 2  #@v2
    """,
    "lazypkg/other.py": """
        def g(x):
            return x * 10  #@v1
            return x * 20  #@v2
    """,
    "lazypkg/both.py": """
        def first(xs):
            from .sub2 import n
            import lazypkg.plain
            return lazypkg.plain.p(n(xs))


        def second(xs):
            from lazypkg import sub2
            return sub2.m(xs)
    """,
    "lazypkg/plain.py": """
        def p(x):
            return x
    """,
    "lazypkg/sub2.py": """
        def n(x):
            return x


        def m(x):
            return x * 7  #@v1
            return x * 8  #@v2
    """,
    "lazypkg/api.py": """
        import fncache
        from lazypkg.both import first, second


        @fncache.memoize
        def one_module_two_paths(x):
            # ``first`` reaches lazypkg through one import, ``second`` through another that reads a
            # further name on it: both names must count.
            return first(x) + second(x)


        @fncache.memoize
        def relative_from(x):
            from .sub import h
            return h(x)


        @fncache.memoize
        def relative_module(x):
            from . import other
            return other.g(x)
    """,
    "main.py": """
        import fncache
        from lazypkg.api import one_module_two_paths, relative_from, relative_module


        @fncache.memoize
        def import_module_attr(x):
            import mymod
            return mymod.helper(x)


        @fncache.memoize
        def import_from(x):
            from fromdep import helper
            return helper(x)


        @fncache.memoize
        def import_dotted(x):
            import deeppkg.inner.calc
            return deeppkg.inner.calc.k(x)


        @fncache.memoize
        def import_in_nested_function(x):
            def inner(y):
                import nestdep as nd
                return nd.f(y)
            return inner(x)


        CALLS = {
            "import_module_attr": (import_module_attr, (5,)),
            "import_from": (import_from, (5,)),
            "import_dotted": (import_dotted, (5,)),
            "import_in_nested_function": (import_in_nested_function, (5,)),
            "relative_from": (relative_from, (5,)),
            "relative_module": (relative_module, (5,)),
            "one_module_two_paths": (one_module_two_paths, (5,)),
        }
    """,
}

# One module imported in the bodies of two helpers (each reads another name through it), and a
# submodule the walk meets before something imports it: a package module reading ``pkg.OFFSET``
# that imports ``from . import backend`` in its body, and ``lazy2.ensure()`` importing it for the
# root, which reads ``lazy2.backend`` first.
PROGRAMS["body_imports_late"] = {
    "tools2.py": """
        def first(x):
            return x + 1


        def second(x):
            return x * 10  #@v1
            return x * 20  #@v2
    """,
    "relpkg/__init__.py": """
        OFFSET = 0
    """,
    "relpkg/api.py": """
        import relpkg


        def g(x):
            from . import backend
            return backend.run(x) + relpkg.OFFSET
    """,
    "relpkg/backend.py": """
        def run(x):
            return x + 1  #@v1
            return x + 2  #@v2
    """,
    "lazy2/__init__.py": """
        def ensure():
            from . import backend
    """,
    "twosub/__init__.py": "",
    "twosub/a.py": """
        def run(x):
            return x + 1
    """,
    "twosub/b.py": """
        def run(x):
            return x + 10  #@v1
            return x + 20  #@v2
    """,
    "chain/__init__.py": """
        def start():
            from . import m3
    """,
    "chain/m3.py": """
        def run(x):
            from . import m2
            return x
    """,
    "chain/m2.py": """
        def run(x):
            from . import m1
            return x
    """,
    "chain/m1.py": """
        def run(x):
            return x + 10  #@v1
            return x + 20  #@v2
    """,
    "lazy2/backend.py": """
        def run(x):
            return x - 1  #@v1
            return x - 2  #@v2
    """,
    "main.py": """
        import chain
        import fncache
        import lazy2
        import relpkg.api


        def g1(x):
            from tools2 import first
            return first(x)


        def g2(x):
            from tools2 import second
            return second(x)


        @fncache.memoize
        def two_helpers_import_one_module(x):
            return g1(x) + g2(x)


        @fncache.memoize
        def relative_import_beside_a_package_global(x):
            return relpkg.api.g(x)


        @fncache.memoize
        def submodule_a_helper_imports(x):
            lazy2.ensure()
            return lazy2.backend.run(x)


        def use_a(x):
            from twosub import a
            return a.run(x)


        def use_b(x):
            from twosub import b
            return b.run(x)


        @fncache.memoize
        def two_helpers_import_two_submodules(x):
            return use_a(x) + use_b(x)


        @fncache.memoize
        def a_chain_of_imports_uncovering_one_module_each(x):
            # Each walk finds one more: start() imports m3, whose run imports m2, whose run m1.
            chain.start()
            chain.m3.run(x)
            chain.m2.run(x)
            return chain.m1.run(x)


        CALLS = {
            "two_helpers_import_one_module": (two_helpers_import_one_module, (3,)),
            "relative_import_beside_a_package_global": (relative_import_beside_a_package_global, (3,)),
            "submodule_a_helper_imports": (submodule_a_helper_imports, (3,)),
            "two_helpers_import_two_submodules": (two_helpers_import_two_submodules, (3,)),
            "a_chain_of_imports_uncovering_one_module_each": (
                a_chain_of_imports_uncovering_one_module_each, (3,)),
        }
    """,
}

# A class statement in a user's file that names a library module as its __module__ (to pickle by
# another name): keyed by that name, its methods were never read.
PROGRAMS["library_named_classes"] = {
    "named.py": """
        class K:
            __module__ = "json"

            def run(self, x):
                return x + 1  #@v1
                return x + 2  #@v2

            @staticmethod
            def twice(x):
                return x * 2  #@v1
                return x * 3  #@v2
    """,
    "main.py": """
        import fncache
        from named import K


        @fncache.memoize
        def method_of_a_class_named_as_a_librarys(x):
            return K().run(x)


        @fncache.memoize
        def static_method_of_it(x):
            return K.twice(x)


        CALLS = {
            "method_of_a_class_named_as_a_librarys": (method_of_a_class_named_as_a_librarys, (3,)),
            "static_method_of_it": (static_method_of_it, (3,)),
        }
    """,
}

# A helper's lru_cache settings: typed=False serves kind(3, 0)'s result for kind(3.0, 0).
PROGRAMS["cache_settings"] = {
    "lrutools.py": """
        import functools


        @functools.lru_cache(maxsize=128)  #@v1
        @functools.lru_cache(maxsize=128, typed=True)  #@v2
        def kind(x, y):
            return type(x).__name__
    """,
    "main.py": """
        import fncache
        from lrutools import kind


        @fncache.memoize
        def reads_through_a_cached_helper(x):
            kind(3, 0)
            return kind(3.0, 0) + str(x)


        CALLS = {"reads_through_a_cached_helper": (reads_through_a_cached_helper, (3,))}
    """,
}

# Attributes set on a memoized helper or an lru_cache wrapper (``helper.scale = 3``): code that reads
# them reads the wrapper, whose own attributes the key left out.
PROGRAMS["wrapper_attributes"] = {
    "helpers.py": """
        import functools

        import fncache


        @fncache.memoize
        def memo_helper(x):
            return x


        memo_helper.scale = 1  #@v1
        memo_helper.scale = 3  #@v2


        @functools.lru_cache
        def lru_helper(x):
            return x


        lru_helper.scale = 1  #@v1
        lru_helper.scale = 3  #@v2
    """,
    "main.py": """
        import fncache
        from helpers import lru_helper, memo_helper


        @fncache.memoize
        def through_memoized(x):
            return x * memo_helper.scale


        @fncache.memoize
        def through_lru(x):
            return x * lru_helper.scale


        CALLS = {
            "through_memoized": (through_memoized, (2,)),
            "through_lru": (through_lru, (2,)),
        }
    """,
}

# Functions (and classes) that reach each other: each one's walk finds the same set of components,
# so ``pong(0)`` was served ``ping(0)``'s result, and ``Right()`` keyed as ``Left()``.
PROGRAMS["mutual_recursion"] = {
    "pingpong.py": """
        def ping(n):
            return "ping" if n <= 0 else pong(n - 1)  #@v1
            return "PING" if n <= 0 else pong(n - 1)  #@v2


        def pong(n):
            return "pong" if n <= 0 else ping(n - 1)  #@v1
            return "PONG" if n <= 0 else ping(n - 1)  #@v2


        class Left:
            def other(self):
                return Right

            def who(self):
                return "left"  #@v1
                return "LEFT"  #@v2


        class Right:
            def other(self):
                return Left

            def who(self):
                return "right"  #@v1
                return "RIGHT"  #@v2
    """,
    "main.py": """
        import fncache
        import pingpong

        ping = fncache.memoize(pingpong.ping)
        pong = fncache.memoize(pingpong.pong)


        @fncache.memoize
        def who(obj):
            return obj.who()


        CALLS = {
            "ping": (ping, (0,)),
            "pong": (pong, (0,)),
            "who_left": (who, (pingpong.Left(),)),
            "who_right": (who, (pingpong.Right(),)),
        }
    """,
}

# A dataclass's bookkeeping (fields, their metadata and types, its parameters): an edit of any of
# it is a new key.
PROGRAMS["dataclass_bookkeeping"] = {
    "readings.py": """
        import dataclasses


        def default_tags():
            return ["a"]  #@v1
            return ["b"]  #@v2


        @dataclasses.dataclass
        class Reading:
            value: float = dataclasses.field(default=0.0, metadata={"unit": "m"})  #@v1
            value: float = dataclasses.field(default=0.0, metadata={"unit": "cm"})  #@v2
            count: int = 0  #@v1
            count: float = 0  #@v2
            tags: list = dataclasses.field(default_factory=default_tags)


        @dataclasses.dataclass(order=False)  #@v1
        @dataclasses.dataclass(order=True)  #@v2
        class Ranked:
            rank: int = 0
    """,
    "main.py": """
        import dataclasses

        import fncache
        from readings import Ranked, Reading


        @fncache.memoize
        def unit_of(x):
            return dataclasses.fields(Reading)[0].metadata["unit"] + str(x)


        @fncache.memoize
        def type_of(x):
            return str(dataclasses.fields(Reading)[1].type) + str(x)


        @fncache.memoize
        def default_tags_of(x):
            return Reading().tags + [x]


        @fncache.memoize
        def ordered(x):
            return str(Ranked.__dataclass_params__.order) + str(x)


        CALLS = {
            "unit_of": (unit_of, (3,)),
            "type_of": (type_of, (3,)),
            "default_tags_of": (default_tags_of, (3,)),
            "ordered": (ordered, (3,)),
        }
    """,
}

# String annotations (all of a module's under ``from __future__ import annotations``): code that
# evaluates them (``get_type_hints``, ``inspect.signature(eval_str=True)``) reads the names in them.
PROGRAMS["string_annotations"] = {
    "parsers.py": """
        import pydantic


        class P:
            def __new__(cls, x):
                return x + 1  #@v1
                return x + 2  #@v2


        def conv(x):
            return x * 10  #@v1
            return x * 20  #@v2


        class K:
            v = "one"  #@v1
            v = "two"  #@v2


        class Unit(pydantic.BaseModel):
            scale: int = 1  #@v1
            scale: int = 2  #@v2
    """,
    "annotated.py": """
        from __future__ import annotations

        import dataclasses
        import typing

        import parsers
        from parsers import K, P, Unit, conv


        def g(a: P):
            pass


        def h(a: typing.Annotated[int, conv]):
            pass


        def nested(a: list["K"]):
            pass


        def dotted(a: parsers.K):
            pass


        @dataclasses.dataclass
        class Config:
            a: P


        KAlias: typing.TypeAlias = "K"
        Items = list["K"]


        def aliased(a: KAlias, b: Items):
            pass


        # Classes and functions defined in the function: their annotations are constants of its
        # code, strings here.
        def local_class(x):
            class C:
                a: K

            return typing.get_type_hints(C)["a"].v + str(x)


        def local_function(x):
            def inner(a: P):
                pass

            return typing.get_type_hints(inner)["a"](x)


        def local_model(x):
            import pydantic

            class Request(pydantic.BaseModel):
                unit: Unit
                value: int

            r = Request.model_validate({"unit": {}, "value": x})
            return r.value * r.unit.scale
    """,
    "main.py": """
        import inspect
        import typing

        import fncache
        from annotated import (Config, aliased, dotted, g, h, local_class, local_function, local_model,
                               nested)
        from parsers import K


        @fncache.memoize
        def local_string_annotation(x):
            class C:
                a: "K"

            return typing.get_type_hints(C)["a"].v + str(x)


        @fncache.memoize
        def future_function(x):
            return typing.get_type_hints(g)["a"](x)


        @fncache.memoize
        def future_dataclass(x):
            return typing.get_type_hints(Config)["a"](x)


        @fncache.memoize
        def future_annotated(x):
            return typing.get_type_hints(h, include_extras=True)["a"].__metadata__[0](x)


        @fncache.memoize
        def nested_forward_reference(x):
            return typing.get_type_hints(nested)["a"].__args__[0].v + str(x)


        @fncache.memoize
        def dotted_name(x):
            return inspect.signature(dotted, eval_str=True).parameters["a"].annotation.v + str(x)


        @fncache.memoize
        def alias_of_a_forward_reference(x):
            hints = typing.get_type_hints(aliased)
            return hints["a"].v + hints["b"].__args__[0].v + str(x)


        CALLS = {
            "alias_of_a_forward_reference": (alias_of_a_forward_reference, (3,)),
            "future_function": (future_function, (3,)),
            "future_dataclass": (future_dataclass, (3,)),
            "future_annotated": (future_annotated, (3,)),
            "nested_forward_reference": (nested_forward_reference, (3,)),
            "dotted_name": (dotted_name, (3,)),
            "local_class": (fncache.memoize(local_class), (3,)),
            "local_function": (fncache.memoize(local_function), (3,)),
            "local_model": (fncache.memoize(local_model), (3,)),
            "local_string_annotation": (local_string_annotation, (3,)),
        }
    """,
}

# -- 2. functools.singledispatch and singledispatchmethod ---------------------------------------
PROGRAMS["singledispatch"] = {
    "libdispatch.py": """
        import functools


        @functools.singledispatch
        def render(x):
            return f"lib {x}"


        @functools.singledispatch
        def label(x):
            return f"lib {x}"
    """,
    "main.py": """
        import functools

        import fncache
        import libdispatch

        fncache.untrack("libdispatch")  # stands for an installed library's dispatcher


        @functools.singledispatch
        def describe(x):
            return f"base {x}"  #@v1
            return f"BASE {x}"  #@v2


        @describe.register
        def _(x: int):
            return f"int {x * 2}"  #@v1
            return f"int {x * 3}"  #@v2


        @describe.register(list)
        def _describe_list(x):
            return f"list {len(x)}"  #@v1
            return f"list {len(x) + 1}"  #@v2


        class Shape:
            @functools.singledispatchmethod
            def area(self, x):
                return "none"  #@v1
                return "NONE"  #@v2

            @area.register
            def _(self, x: int):
                return x * x  #@v1
                return x * x * x  #@v2


        @libdispatch.render.register
        def _(x: int):
            return f"user {x}"  #@v1
            return f"USER {x}"  #@v2


        # Registered on a library's dispatcher (where no plain function of the user's is) as an
        # lru_cache wrapper and as a partial: the user's code they run counts as a function's does.
        @functools.lru_cache
        def _render_float(x):
            return f"float {x}"  #@v1
            return f"FLOAT {x}"  #@v2


        def _render_text(x, mark):
            return f"{x}{mark}"


        libdispatch.label.register(float, _render_float)
        libdispatch.label.register(str, functools.partial(_render_text, mark="!"))  #@v1
        libdispatch.label.register(str, functools.partial(_render_text, mark="?"))  #@v2


        @fncache.memoize
        def dispatch_base(x):
            return describe(x)


        @fncache.memoize
        def dispatch_registered(x):
            return describe(x)


        @fncache.memoize
        def dispatch_list(x):
            return describe(x)


        @fncache.memoize
        def dispatch_method(x):
            return Shape().area(x)


        @fncache.memoize
        def dispatch_method_base(x):
            return Shape().area(x)


        @fncache.memoize
        def dispatch_library(x):
            return libdispatch.render(x)


        @fncache.memoize
        def dispatch_library_wrapped(x):
            return libdispatch.label(x)


        memoized_dispatcher = fncache.memoize(describe)

        CALLS = {
            "dispatch_base": (dispatch_base, ("s",)),
            "dispatch_registered": (dispatch_registered, (4,)),
            "dispatch_list": (dispatch_list, ([1, 2],)),
            "dispatch_method": (dispatch_method, (3,)),
            "dispatch_method_base": (dispatch_method_base, ("s",)),
            "dispatch_library": (dispatch_library, (3,)),
            "dispatch_library_cached": (dispatch_library_wrapped, (1.5,)),
            "dispatch_library_partial": (dispatch_library_wrapped, ("s",)),
            "memoized_dispatcher": (memoized_dispatcher, (4,)),
        }
    """,
}

# -- 3. enum special methods -------------------------------------------------------------------
PROGRAMS["enums"] = {
    "main.py": """
        import enum

        import fncache


        class WithStr(enum.Enum):
            A = 1

            def __str__(self):
                return "a"  #@v1
                return "A"  #@v2


        class WithFormat(enum.Enum):
            A = 1

            def __format__(self, spec):
                return "fa"  #@v1
                return "FA"  #@v2


        class WithRepr(enum.Enum):
            A = 1

            def __repr__(self):
                return "ra"  #@v1
                return "RA"  #@v2


        class WithInit(enum.Enum):
            A = (1, 2)

            def __init__(self, a, b):
                self.total = a + b  #@v1
                self.total = a * b + 10  #@v2


        class WithNew(enum.Enum):
            def __new__(cls, value):
                obj = object.__new__(cls)
                obj._value_ = value
                obj.double = value * 2  #@v1
                obj.double = value * 3  #@v2
                return obj

            A = 1


        class WithEq(enum.Enum):
            A = 1
            B = 2

            def __eq__(self, other):
                return True  #@v1
                return self is other  #@v2

            def __hash__(self):
                return hash(self._name_)


        class WithMissing(enum.Enum):
            A = 1

            @classmethod
            def _missing_(cls, value):
                return cls.A  #@v1
                return None  #@v2


        class LowerNames(enum.Enum):
            def _generate_next_value_(name, start, count, last_values):
                return name.lower()  #@v1
                return name.upper()  #@v2


        @fncache.memoize
        def enum_str():
            return str(WithStr.A)


        @fncache.memoize
        def enum_format():
            return f"{WithFormat.A}"


        @fncache.memoize
        def enum_repr():
            return repr(WithRepr.A)


        @fncache.memoize
        def enum_init():
            return WithInit.A.total


        @fncache.memoize
        def enum_new():
            return WithNew.A.double


        @fncache.memoize
        def enum_eq():
            return WithEq.A == WithEq.B


        @fncache.memoize
        def enum_missing():
            try:
                return WithMissing(5).name
            except ValueError:
                return "no member"


        @fncache.memoize
        def enum_next_value():
            made = LowerNames("Made", "X Y")
            return made.X.value


        CALLS = {
            "enum_str": (enum_str, ()),
            "enum_format": (enum_format, ()),
            "enum_repr": (enum_repr, ()),
            "enum_init": (enum_init, ()),
            "enum_new": (enum_new, ()),
            "enum_eq": (enum_eq, ()),
            "enum_missing": (enum_missing, ()),
            "enum_next_value": (enum_next_value, ()),
        }
    """,
}

# -- 8. function attributes --------------------------------------------------------------------
PROGRAMS["function_attrs"] = {
    "helpers.py": """
        def scaled(x):
            return x * scaled.factor


        scaled.factor = 2  #@v1
        scaled.factor = 3  #@v2


        def lookup(key):
            return lookup.table[key]


        lookup.table = {"a": 1}  #@v1
        lookup.table = {"a": 2}  #@v2


        def via_bound(key):
            return via_bound.get(key)


        via_bound.get = {"a": 1}.get  #@v1
        via_bound.get = {"a": 2}.get  #@v2
    """,
    "main.py": """
        import fncache
        from helpers import lookup, scaled, via_bound


        def local_helper(x):
            return x + local_helper.offset


        local_helper.offset = 10  #@v1
        local_helper.offset = 20  #@v2


        @fncache.memoize
        def attr_number(x):
            return scaled(x)


        @fncache.memoize
        def attr_dict(key):
            return lookup(key)


        @fncache.memoize
        def attr_in_main(x):
            return local_helper(x)


        @fncache.memoize
        def attr_bound_method(key):
            return via_bound(key)


        CALLS = {
            "attr_number": (attr_number, (5,)),
            "attr_dict": (attr_dict, ("a",)),
            "attr_bound_method": (attr_bound_method, ("a",)),
            "attr_in_main": (attr_in_main, (5,)),
        }
    """,
}

# -- 9. module __getattr__ (PEP 562) -----------------------------------------------------------
PROGRAMS["module_getattr"] = {
    "settings.py": """
        _LAZY = {"SCALE": 2}  #@v1
        _LAZY = {"SCALE": 3}  #@v2


        def __getattr__(name):
            try:
                return _LAZY[name]
            except KeyError:
                raise AttributeError(name) from None
    """,
    "offsets.py": """
        def __getattr__(name):
            if name == "OFFSET":
                return 10  #@v1
                return 20  #@v2
            raise AttributeError(name)
    """,
    "flags.py": """
        import sys
        import types


        class _Flags(types.ModuleType):
            @property
            def LEVEL(self):
                return 1  #@v1
                return 2  #@v2


        sys.modules[__name__].__class__ = _Flags
    """,
    "lazysub/__init__.py": """
        import importlib


        def __getattr__(name):
            return importlib.import_module(f".{name}", __name__)
    """,
    "lazysub/tools.py": """
        def f(x):
            return x * 7  #@v1
            return x * 8  #@v2
    """,
    "main.py": """
        import fncache
        import flags
        import lazysub
        import offsets
        import settings


        @fncache.memoize
        def getattr_table(x):
            return x * settings.SCALE


        @fncache.memoize
        def getattr_code(x):
            return x + offsets.OFFSET


        @fncache.memoize
        def module_property(x):
            return x + flags.LEVEL


        @fncache.memoize
        def lazy_submodule(x):
            return lazysub.tools.f(x)


        CALLS = {
            "module_property": (module_property, (5,)),
            "lazy_submodule": (lazy_submodule, (5,)),
            "getattr_table": (getattr_table, (5,)),
            "getattr_code": (getattr_code, (5,)),
        }
    """,
}

# -- 10. two namespaces with one __name__ ------------------------------------------------------
PROGRAMS["run_path_plugins"] = {
    "plugin_a.py": """
        SCALE = 2  #@v1
        SCALE = 3  #@v2


        def apply(x):
            return x * SCALE
    """,
    "plugin_b.py": """
        SCALE = 100


        def apply(x):
            return x * SCALE
    """,
    "main.py": """
        import os
        import runpy

        import fncache

        HERE = os.path.dirname(os.path.abspath(__file__))
        PLUGIN_A = runpy.run_path(os.path.join(HERE, "plugin_a.py"))["apply"]
        PLUGIN_B = runpy.run_path(os.path.join(HERE, "plugin_b.py"))["apply"]


        @fncache.memoize
        def both_plugins(x):
            return PLUGIN_A(x) + PLUGIN_B(x)


        CALLS = {"both_plugins": (both_plugins, (1,))}
    """,
}

# -- 15. wrapped helpers reached through values ----------------------------------------------
# A functools.cache/lru_cache wrapper pickles by name, a library function made by
# functools.singledispatch keeps the user's function as __wrapped__: wherever they are reached (a
# dispatch dict, a registry a decorator fills, an argument, a default, a partial, a class attribute),
# the code they wrap counts.
PROGRAMS["wrappers_in_values"] = {
    "helpers.py": """
        import functools


        @functools.cache
        def h_cache(x):
            return x * 2  #@v1
            return x * 3  #@v2


        @functools.lru_cache(maxsize=64)
        def h_lru(x):
            return x + 1  #@v1
            return x + 2  #@v2


        @functools.singledispatch
        def h_dispatch(x):
            return x - 1  #@v1
            return x - 2  #@v2


        REGISTRY = {}


        def register(fn):
            REGISTRY[fn.__name__] = fn
            return fn


        @register
        @functools.cache
        def h_registered(x):
            return x * 5  #@v1
            return x * 6  #@v2


        def _plain(x):
            return x * 10  #@v1
            return x * 20  #@v2


        CODES = {"plain": _plain.__code__}
    """,
    "main.py": """
        import functools
        import types

        import fncache
        import helpers

        # One dispatch dict per entry point: each must see the edit of its own helper.
        OPS_CACHE = {"h": helpers.h_cache}
        OPS_LRU = {"h": helpers.h_lru}
        OPS_DISPATCH = {"h": helpers.h_dispatch}
        PARTIAL = functools.partial(helpers.h_lru, 1)


        class Table:
            ops = {"cache": helpers.h_cache}


        @fncache.memoize
        def dict_cache(x):
            return OPS_CACHE["h"](x)


        @fncache.memoize
        def dict_lru(x):
            return OPS_LRU["h"](x)


        @fncache.memoize
        def dict_singledispatch(x):
            return OPS_DISPATCH["h"](x)


        @fncache.memoize
        def registry(x):
            return helpers.REGISTRY["h_registered"](x)


        @fncache.memoize
        def argument(fn, x):
            return fn(x)


        @fncache.memoize
        def partial_argument(p, x):
            return p() + x


        @fncache.memoize
        def tuple_default(x, fns=(helpers.h_cache,)):
            return fns[0](x)


        @fncache.memoize
        def partial_global(x):
            return PARTIAL() + x


        @fncache.memoize
        def class_attribute_dict(x):
            return Table.ops["cache"](x)


        @fncache.memoize
        def code_in_dict(x):
            return types.FunctionType(helpers.CODES["plain"], {})(x)


        CALLS = {
            "dict_cache": (dict_cache, (5,)),
            "dict_lru": (dict_lru, (5,)),
            "dict_singledispatch": (dict_singledispatch, (5,)),
            "registry": (registry, (5,)),
            "argument_cache": (argument, (helpers.h_cache, 5)),
            "argument_lru": (argument, (helpers.h_lru, 5)),
            "argument_singledispatch": (argument, (helpers.h_dispatch, 5)),
            "argument_partial": (partial_argument, (functools.partial(helpers.h_lru, 1), 5)),
            "tuple_default": (tuple_default, (5,)),
            "partial_global": (partial_global, (5,)),
            "class_attribute_dict": (class_attribute_dict, (5,)),
            "code_in_dict": (code_in_dict, (5,)),
        }
    """,
}

# -- 15b. user modules reached as values ----------------------------------------------------
# A user module held by a value (a default, a container, a class's or an instance's attribute, an
# argument) or passed on to other code is keyed by every name it defines: whatever receives it may
# read any of them. By name alone, each of these was served version 1's result.
PROGRAMS["modules_as_values"] = {
    "util.py": """
        import client
        import paths
        from client import CLIENT

        __version__ = "1"  #@v1
        __version__ = "2"  #@v2


        def helper(x):
            return x + 1  #@v1
            return x + 5  #@v2


        SCALE = 10  #@v1
        SCALE = 20  #@v2
    """,
    # Held by util, which is counted whole: a module it imports is keyed by name (not walked
    # whole in turn: its path would change the key with the checkout), a value that cannot be
    # pickled by its type and name (it raised before), and neither stops a call from caching.
    "client.py": """
        import threading


        class Client:
            def __init__(self):
                self.lock = threading.Lock()


        CLIENT = Client()
    """,
    "paths.py": """
        from pathlib import Path

        DATA = Path(__file__).resolve().parent / "data"
    """,
    # A module whose names come from its __getattr__ (PEP 562), reached as a value.
    "served.py": """
        def __getattr__(name):
            if name == "factor":
                return 3  #@v1
                return 4  #@v2
            raise AttributeError(name)
    """,
    "pkg/__init__.py": "",
    "pkg/tools.py": """
        def twice(x):
            return 2 * x  #@v1
            return 3 * x  #@v2
    """,
    "main.py": """
        import fncache
        import served
        import util
        from pkg import tools

        PLUGINS = {"u": util}


        class Holder:
            module = util

            def __init__(self):
                self.tools = tools


        HOLDER = Holder()


        def _use(m, x):
            return m.helper(x)


        @fncache.memoize
        def default(x, m=util):
            return m.helper(x)


        @fncache.memoize
        def dict_entry(x):
            return PLUGINS["u"].helper(x)


        @fncache.memoize
        def class_attribute(x):
            return Holder.module.SCALE * x


        @fncache.memoize
        def instance_attribute(x):
            return HOLDER.tools.twice(x)


        @fncache.memoize
        def argument(m, x):
            return m.helper(x)


        @fncache.memoize
        def global_passed_on(x):
            return _use(util, x)


        def _make(m):
            @fncache.memoize
            def closure_passed_on(x):
                return _use(m, x)

            return closure_passed_on


        closure_passed_on = _make(util)


        @fncache.memoize
        def version(m=util):
            return m.__version__


        @fncache.memoize
        def served_by_getattr(x, m=served):
            return m.factor * x


        CALLS = {
            "default": (default, (5,)),
            "dict_entry": (dict_entry, (5,)),
            "class_attribute": (class_attribute, (5,)),
            "instance_attribute": (instance_attribute, (5,)),
            "argument": (argument, (util, 5)),
            "global_passed_on": (global_passed_on, (5,)),
            "closure_passed_on": (closure_passed_on, (5,)),
            "version": (version, ()),
            "served_by_getattr": (served_by_getattr, (5,)),
        }
    """,
}

# -- 15c. pydantic models ------------------------------------------------------------------
# A model's class is keyed by its fields, validators, config and methods; what pydantic derives from
# them (the core schema, which names the class by id(), the compiled validator and serializer) is
# not, or no two processes shared a key (version 1 again must hit).
PROGRAMS["pydantic_models"] = {
    "models.py": """
        from typing import Annotated

        import pydantic
        import pydantic.dataclasses
        import typing_extensions


        class Point(pydantic.BaseModel):
            x: int = 1  #@v1
            x: int = 2  #@v2
            y: int = 0


        class Scaled(pydantic.BaseModel):
            v: int

            def double(self):
                return self.v * 2  #@v1
                return self.v * 3  #@v2


        class Checked(pydantic.BaseModel):
            name: str

            @pydantic.field_validator("name")
            @classmethod
            def shout(cls, value):
                return value.upper()  #@v1
                return value.lower()  #@v2


        class Two(pydantic.BaseModel):
            a: str
            b: str

            @pydantic.field_validator("a")  #@v1
            @pydantic.field_validator("b")  #@v2
            @classmethod
            def up(cls, value):
                return value.upper()


        class Stripped(pydantic.BaseModel):
            model_config = pydantic.ConfigDict(str_strip_whitespace=True)  #@v1
            model_config = pydantic.ConfigDict(str_strip_whitespace=False)  #@v2
            s: str


        class Typed(pydantic.BaseModel):
            n: int  #@v1
            n: float  #@v2


        # A constraint that lives only in a type alias's value (and in the core schema).
        Small = typing_extensions.TypeAliasType("Small", Annotated[int, pydantic.Field(le=5)])  #@v1
        Small = typing_extensions.TypeAliasType("Small", Annotated[int, pydantic.Field(le=50)])  #@v2


        class Limited(pydantic.BaseModel):
            v: Small


        # A global adapter keeps the core schema too (fncache.values.pydantic keys what it is
        # made from).
        POINTS = pydantic.TypeAdapter(list[Point])


        @pydantic.dataclasses.dataclass
        class Box:
            size: int = 3  #@v1
            size: int = 4  #@v2
    """,
    "main.py": """
        import pydantic

        import fncache
        import models


        @fncache.memoize
        def field_default(k):
            return models.Point().x + k


        @fncache.memoize
        def method(k):
            return models.Scaled(v=k).double()


        @fncache.memoize
        def validator(name):
            return models.Checked(name=name).name


        @fncache.memoize
        def validator_fields(a, b):
            t = models.Two(a=a, b=b)
            return t.a + t.b


        @fncache.memoize
        def config(s):
            return models.Stripped(s=s).s


        @fncache.memoize
        def field_type(n):
            return repr(models.Typed(n=n).n)


        @fncache.memoize
        def dataclass_default(k):
            return models.Box().size + k


        @fncache.memoize
        def type_alias(v):
            try:
                return models.Limited(v=v).v
            except pydantic.ValidationError:
                return "too large"


        @fncache.memoize
        def adapter(n):
            return [p.x for p in models.POINTS.validate_python([{}] * n)]


        @fncache.memoize
        def model_argument(p):
            return p.x * 10 + p.y


        CALLS = {
            "field_default": (field_default, (1,)),
            "method": (method, (5,)),
            "validator": (validator, ("Ab",)),
            "validator_fields": (validator_fields, ("x", "y")),
            "config": (config, (" a ",)),
            "field_type": (field_type, (1,)),
            "dataclass_default": (dataclass_default, (1,)),
            "type_alias": (type_alias, (10,)),
            "adapter": (adapter, (2,)),
            "model_argument": (model_argument, (models.Point(y=1),)),
        }
    """,
}

# -- 15d. pandas accessors of the user's ----------------------------------------------------
# ``df.geo.area()`` reaches the accessor's class through pandas' registry, not through a name the
# code reads: its code counts by the accessor's name, on DataFrame, Series and Index alike.
PROGRAMS["pandas_accessors"] = {
    "accessors.py": """
        import pandas as pd


        @pd.api.extensions.register_dataframe_accessor("geo")
        class Geo:
            def __init__(self, frame):
                self._frame = frame

            def area(self):
                return int(self._frame["w"].sum()) * 2  #@v1
                return int(self._frame["w"].sum()) * 3  #@v2


        @pd.api.extensions.register_series_accessor("units")
        class Units:
            def __init__(self, series):
                self._series = series

            def total(self):
                return int(self._series.sum()) + 1  #@v1
                return int(self._series.sum()) + 2  #@v2
    """,
    "main.py": """
        import pandas as pd

        import accessors  # noqa: F401 - registers the accessors
        import fncache


        @fncache.memoize
        def frame_accessor(n):
            return pd.DataFrame({"w": list(range(n))}).geo.area()


        @fncache.memoize
        def series_accessor(s):
            return s.units.total()


        CALLS = {
            "frame_accessor": (frame_accessor, (4,)),
            "series_accessor": (series_accessor, (pd.Series([1, 2, 3]),)),
        }
    """,
}

# -- 16. methods memoized with ignore=["self"] -----------------------------------------------
# Ignoring self drops the instance's state, not the code of its class: the class defining the
# method (and its bases, here one in another module) counts, and so does a subclass's override.
PROGRAMS["ignore_self"] = {
    "shapes_base.py": """
        class Base:
            def scale(self):
                return 2  #@v1
                return 3  #@v2
    """,
    "main.py": """
        import fncache
        from shapes_base import Base


        class Own:
            def __init__(self, n):
                self.n = n

            def helper(self, x):
                return x + 1  #@v1
                return x + 2  #@v2

            @fncache.memoize(ignore=["self"])
            def run(self, x):
                return self.helper(x)


        class FromBase(Base):
            @fncache.memoize(ignore=["self"])
            def run(self, x):
                return x * self.scale()


        class Parent:
            def helper(self, x):
                return x

            @fncache.memoize(ignore=["self"])
            def run(self, x):
                return self.helper(x)


        class Child(Parent):
            def helper(self, x):
                return x * 10  #@v1
                return x * 20  #@v2


        CALLS = {
            "own_class": (Own.run, (Own(1), 5)),
            "base_in_another_module": (FromBase.run, (FromBase(), 5)),
            "subclass_override": (Parent.run, (Child(), 5)),
        }
    """,
}

# -- 17. numpy ufuncs made from Python functions -------------------------------------------
# np.frompyfunc's ufunc cannot be pickled; it holds the function, whose code counts (as for
# np.vectorize), read as a global or inside a value.
PROGRAMS["frompyfunc"] = {
    "ufunc_helpers.py": """
        def h(x):
            return x * 2  #@v1
            return x * 3  #@v2


        def k(x):
            return x + 1  #@v1
            return x + 2  #@v2
    """,
    "main.py": """
        import numpy as np

        import fncache
        import ufunc_helpers

        U = np.frompyfunc(ufunc_helpers.h, 1, 1)
        TABLE = {"k": np.frompyfunc(ufunc_helpers.k, 1, 1)}


        @fncache.memoize
        def global_ufunc(x):
            return U(np.arange(x)).tolist()


        @fncache.memoize
        def ufunc_in_dict(x):
            return TABLE["k"](np.arange(x)).tolist()


        CALLS = {
            "global_ufunc": (global_ufunc, (3,)),
            "ufunc_in_dict": (ufunc_in_dict, (3,)),
        }
    """,
}

# -- 14. classes built on abc.ABC, typing.Protocol, collections.abc ----------------------------
PROGRAMS["abc_classes"] = {
    "main.py": """
        import abc
        import collections.abc
        import typing

        import fncache


        class Base(abc.ABC):
            @abc.abstractmethod
            def f(self, x): ...


        class Impl(Base):
            def f(self, x):
                return x * 2  #@v1
                return x * 3  #@v2


        class SupportsDouble(typing.Protocol):
            def double(self) -> int: ...


        @typing.runtime_checkable
        class Closable(typing.Protocol):
            def close(self) -> None: ...


        class Doubler(SupportsDouble):
            def __init__(self, v):
                self.v = v

            def double(self):
                return self.v * 2  #@v1
                return self.v * 4  #@v2


        class Bag(collections.abc.Mapping):
            def __init__(self, items):
                self._items = dict(items)

            def __getitem__(self, key):
                return self._items[key] + 1  #@v1
                return self._items[key] + 2  #@v2

            def __iter__(self):
                return iter(self._items)

            def __len__(self):
                return len(self._items)


        @fncache.memoize
        def abc_used(x):
            return Impl().f(x)


        @fncache.memoize
        def abc_argument(obj, x):
            return obj.f(x)


        @fncache.memoize
        def protocol_used(x):
            return Doubler(x).double() + isinstance(Doubler(x), Closable)


        @fncache.memoize
        def mapping_argument(bag):
            return bag["a"]


        CALLS = {
            "abc_used": (abc_used, (5,)),
            "abc_argument": (abc_argument, (Impl(), 5)),
            "protocol_used": (protocol_used, (5,)),
            "mapping_argument": (mapping_argument, (Bag({"a": 1}),)),
        }
    """,
}

# -- 15. globals that cannot be pickled --------------------------------------------------------
PROGRAMS["unpicklable_globals"] = {
    "main.py": """
        import functools
        import logging
        import sqlite3
        import threading

        import fncache

        LOCK = threading.Lock()
        HANDLER = logging.StreamHandler()
        CONN = sqlite3.connect(":memory:")
        LOCAL = threading.local()


        class Counter:
            lock = threading.Lock()

            def bump(self, x):
                with self.lock:
                    return x + 1  #@v1
                    return x + 2  #@v2


        class Lazy:
            def __init__(self, v):
                self.v = v

            @functools.cached_property
            def double(self):
                return self.v * 2  #@v1
                return self.v * 3  #@v2


        @fncache.memoize
        def with_lock(x):
            with LOCK:
                return x * 2  #@v1
                return x * 3  #@v2


        @fncache.memoize
        def with_handler(x):
            assert HANDLER is not None
            return x * 2  #@v1
            return x * 3  #@v2


        @fncache.memoize
        def with_connection(x):
            return CONN.execute("select ? * 2", (x,)).fetchone()[0]  #@v1
            return CONN.execute("select ? * 3", (x,)).fetchone()[0]  #@v2


        @fncache.memoize
        def with_thread_local(x):
            LOCAL.seen = x
            return x * 2  #@v1
            return x * 3  #@v2


        @fncache.memoize
        def class_lock(x):
            return Counter().bump(x)


        @fncache.memoize
        def cached_property_used(x):
            return Lazy(x).double


        @fncache.memoize
        def cached_property_argument(obj):
            return obj.double


        CALLS = {
            "with_lock": (with_lock, (5,)),
            "with_handler": (with_handler, (5,)),
            "with_connection": (with_connection, (5,)),
            "with_thread_local": (with_thread_local, (5,)),
            "class_lock": (class_lock, (5,)),
            "cached_property_used": (cached_property_used, (5,)),
            "cached_property_argument": (cached_property_argument, (Lazy(5),)),
        }
    """,
}


PROGRAMS["by_name_values"] = {
    "defaults.py": """
        class Defaults:
            def __init__(self):
                self.k = 1  #@v1
                self.k = 5  #@v2

            def __reduce__(self):
                return "DEFAULTS"


        DEFAULTS = Defaults()
    """,
    "main.py": """
        import functools
        import struct
        import sys
        import threading

        import defaults
        import fncache


        class Settings:
            def __init__(self, k):
                self.k = k

            def __reduce__(self):
                return "SETTINGS"


        SETTINGS = Settings(1)  #@v1
        SETTINGS = Settings(5)  #@v2


        class Found:
            def __init__(self, k):
                self.k = k

            def __reduce__(self):
                return (getattr, (sys.modules[__name__], "FOUND"))


        FOUND = Found(1)  #@v1
        FOUND = Found(5)  #@v2


        def get_current():
            return CURRENT


        class Current:
            def __init__(self, k):
                self.k = k

            def __reduce__(self):
                return (get_current, ())


        CURRENT = Current(1)  #@v1
        CURRENT = Current(5)  #@v2


        class Pool:
            def __init__(self):
                self.lock = threading.Lock()

            def __reduce__(self):
                return "POOL"

            def run(self, x):
                return x + 1  #@v1
                return x + 5  #@v2


        POOL = Pool()


        def order(a, b):
            return (a > b) - (a < b)  #@v1
            return (b > a) - (b < a)  #@v2


        KEY = functools.cmp_to_key(order)
        PACKED = struct.Struct("<i")  #@v1
        PACKED = struct.Struct("<h")  #@v2


        @fncache.memoize
        def singleton_global(x):
            return x + SETTINGS.k


        @fncache.memoize
        def singleton_argument(x, s):
            return x + s.k


        @fncache.memoize
        def singleton_of_another_module(x):
            return x + defaults.DEFAULTS.k


        @fncache.memoize
        def singleton_by_getattr(x):
            return x + FOUND.k


        @fncache.memoize
        def singleton_by_accessor(x):
            return x + CURRENT.k


        @fncache.memoize
        def singleton_with_a_lock(x):
            return POOL.run(x)


        @fncache.memoize
        def sort_key(x):
            return sorted([3, 1, x], key=KEY)


        @fncache.memoize
        def struct_format(x):
            return x + PACKED.size


        CALLS = {
            "singleton_global": (singleton_global, (1,)),
            "singleton_argument": (singleton_argument, (1, SETTINGS)),
            "singleton_of_another_module": (singleton_of_another_module, (1,)),
            "singleton_by_getattr": (singleton_by_getattr, (1,)),
            "singleton_by_accessor": (singleton_by_accessor, (1,)),
            "singleton_with_a_lock": (singleton_with_a_lock, (1,)),
            "sort_key": (sort_key, (2,)),
            "struct_format": (struct_format, (1,)),
        }
    """,
}


# -- objects that cannot be pickled and hold what the code computes from, and user code put into
# builtins: each was keyed by its type and name alone (or not at all), a stale hit (a review's).
PROGRAMS["stdlib_state"] = {
    "helpers.py": """
        import builtins
        import functools
        import hashlib
        import hmac
        import json
        import os
        import weakref
        import zipfile

        SALTED = hashlib.sha256(b"salt-v1")  #@v1
        SALTED = hashlib.sha256(b"salt-v2")  #@v2
        SIGNER = hmac.new(b"key-v1", digestmod="sha256")  #@v1
        SIGNER = hmac.new(b"key-v2", digestmod="sha256")  #@v2


        def _hook(d, k):
            return {key: v * k for key, v in d.items()}


        DECODER = json.JSONDecoder(object_hook=functools.partial(_hook, k=2))  #@v1
        DECODER = json.JSONDecoder(object_hook=functools.partial(_hook, k=3))  #@v2


        class Runner:
            def run(self, x):
                return x * 2  #@v1
                return x * 3  #@v2


        _runner = Runner()
        CALLBACK = weakref.WeakMethod(_runner.run)

        _here = os.path.dirname(os.path.abspath(__file__))
        for _name, _k in (("a.zip", "2"), ("b.zip", "3")):
            with zipfile.ZipFile(os.path.join(_here, _name), "w") as _z:
                _z.writestr(zipfile.ZipInfo("k", (2024, 1, 1, 0, 0, 0)), _k)
        ARCHIVE = zipfile.ZipFile(os.path.join(_here, "a.zip"))  #@v1
        ARCHIVE = zipfile.ZipFile(os.path.join(_here, "b.zip"))  #@v2


        def _(text):  # a gettext-style function, installed as a builtin
            return {"hello": "bonjour"}.get(text, text)  #@v1
            return {"hello": "salut"}.get(text, text)  #@v2


        def _round(x, ndigits=None):
            if ndigits is not None:
                return float(f"{x:.{ndigits}f}")
            return int(x) + 100  #@v1
            return int(x) + 200  #@v2


        builtins._ = _
        builtins.round = _round
    """,
    "main.py": """
        import fncache
        from helpers import ARCHIVE, CALLBACK, DECODER, SALTED, SIGNER
        import helpers


        @fncache.memoize
        def salted_hash(x):
            h = SALTED.copy()
            h.update(str(x).encode())
            return h.hexdigest()[:12]


        @fncache.memoize
        def signed(x):
            s = SIGNER.copy()
            s.update(str(x).encode())
            return s.hexdigest()[:12]


        @fncache.memoize
        def decoded(x):
            return DECODER.decode('{"a": %d}' % x)


        @fncache.memoize
        def weak_callback(x):
            return CALLBACK()(x)


        @fncache.memoize
        def archive_member(x):
            return int(ARCHIVE.read("k")) * x


        @fncache.memoize
        def translated(x):
            return _("hello") * x


        @fncache.memoize
        def rounded(x):
            return round(x)


        CALLS = {
            "salted_hash": (salted_hash, (5,)),
            "signed": (signed, (5,)),
            "decoded": (decoded, (5,)),
            "weak_callback": (weak_callback, (5,)),
            "archive_member": (archive_member, (5,)),
            "translated": (translated, (2,)),
            "rounded": (rounded, (7.2,)),
        }
    """,
}


# -- a random generator's methods read through their module (``random.randint``, ``np.random.rand``)
# were keyed by name: a seed set at import, edited, kept the key (a stale hit), where the same
# method bound to a name of the user's (``from random import randint``) was keyed by its state.
PROGRAMS["module_rng"] = {
    "main.py": """
        import random

        import numpy as np
        import numpy.random as npr

        import fncache

        random.seed(1)  #@v1
        random.seed(2)  #@v2
        np.random.seed(1)  #@v1
        np.random.seed(2)  #@v2


        @fncache.memoize
        def drawn(x):
            return random.randint(0, 10**9) + x


        @fncache.memoize
        def drawn_np(x):
            return float(np.random.rand()) + x


        # Reads the generator's state without drawing, before drawn_np draws from it: a hit
        # does not draw, so a call after one that drew keys the state it finds (a miss, rightly).
        @fncache.memoize
        def seeded_submodule(x):
            return int(npr.get_state()[1][0]) + x


        CALLS = {
            "drawn": (drawn, (0,)),
            "seeded_submodule": (seeded_submodule, (0,)),
            "drawn_np": (drawn_np, (0,)),
        }
    """,
}


# -- what an object's pickle drops but the code reads: an enum member's own attributes, annotations,
# the type arguments of a class's bases. Each was a stale hit (a review's reproductions).
PROGRAMS["pickle_drops"] = {
    "main.py": """
        import enum
        import typing

        import fncache


        class Planet(enum.Enum):
            MERCURY = (1, 3.3)  #@v1
            MERCURY = (1, 4.4)  #@v2

            def __new__(cls, idx, mass):
                obj = object.__new__(cls)
                obj._value_ = idx
                obj.mass = mass
                return obj


        class Color(enum.Enum):
            RED = "r"


        Color.RED.label = "a"  #@v1
        Color.RED.label = "b"  #@v2


        class Op(enum.Enum):
            ADD = ("add", lambda a, b: a + b)  #@v1
            ADD = ("add", lambda a, b: a * b)  #@v2

            def __new__(cls, name, fn):
                obj = object.__new__(cls)
                obj._value_ = name
                obj.fn = fn
                return obj


        def helper(x: int):  #@v1
        def helper(x: str):  #@v2
            return x * 2


        T = typing.TypeVar("T")


        class Parser(typing.Generic[T]):
            def parse(self, s):
                return typing.get_args(type(self).__orig_bases__[0])[0](s)


        class NumParser(Parser[int]):  #@v1
        class NumParser(Parser[float]):  #@v2
            pass


        @fncache.memoize
        def member_attribute():
            return Planet.MERCURY.mass


        @fncache.memoize
        def member_attribute_set_later():
            return Color.RED.label


        @fncache.memoize
        def member_holding_code(op):
            return op.fn(3, 4)


        @fncache.memoize
        def annotation_read(raw):
            return helper(helper.__annotations__["x"](raw))


        @fncache.memoize
        def base_type_argument(s):
            return NumParser().parse(s)


        CALLS = {
            "member_attribute": (member_attribute, ()),
            "member_attribute_set_later": (member_attribute_set_later, ()),
            "member_holding_code": (member_holding_code, (Op.ADD,)),
            "annotation_read": (annotation_read, ("3",)),
            "base_type_argument": (base_type_argument, ("3",)),
        }
    """,
}

# -- third-party code shapes --------------------------------------------------------------------
# A wrapt decorator passes for the function it wraps (isinstance, __code__), attrs' converters
# are functions a factory makes (optional(conv): one name whatever conv is), attrs writes a
# frozen class's __hash__ with hash() of a text in it (a new number in every process), and
# numba's typed containers cannot be pickled: each kept its key through an edit, or never hit.
PROGRAMS["third_party_code"] = {
    "helpers.py": """
        import attrs
        import mylib
        import numba
        import numpy as np
        import wrapt


        @wrapt.decorator
        def doubled(wrapped, instance, args, kwargs):
            return wrapped(*args, **kwargs) * 2  #@v1
            return wrapped(*args, **kwargs) * 3  #@v2


        def scaled(k):
            @wrapt.decorator
            def wrapper(wrapped, instance, args, kwargs):
                return wrapped(*args, **kwargs) * k
            return wrapper


        @scaled(2)  #@v1
        @scaled(5)  #@v2
        def helper(x):
            return x + 1


        def conv(v):
            return int(v) * 2  #@v1
            return int(v) * 3  #@v2


        @attrs.define
        class Converted:
            a = attrs.field(converter=attrs.converters.optional(conv))


        @attrs.define
        class Defaulted:
            b = attrs.field(default=None, converter=attrs.converters.default_if_none(2))  #@v1
            b = attrs.field(default=None, converter=attrs.converters.default_if_none(5))  #@v2


        @attrs.define(frozen=True)
        class Frozen:
            a: int
            k: int = 2  #@v1
            k: int = 3  #@v2


        TABLE = numba.typed.List([2, 4])  #@v1
        TABLE = numba.typed.List([5, 4])  #@v2


        class Scaled(wrapt.ObjectProxy):  # the user's proxy: its code and its own attributes
            def __init__(self, wrapped, k):
                super().__init__(wrapped)
                self._self_k = k

            def scaled(self):
                return [v * self._self_k for v in self.__wrapped__]  #@v1
                return [v * self._self_k + 1 for v in self.__wrapped__]  #@v2


        SCALED = Scaled([1, 2], 2)
        SCALED_BY = Scaled([1, 2], 2)  #@v1
        SCALED_BY = Scaled([1, 2], 3)  #@v2


        @attrs.define
        class Rooted:
            v = attrs.field(converter=attrs.converters.optional(np.sqrt))  #@v1
            v = attrs.field(converter=attrs.converters.optional(np.negative))  #@v2


        def step(x):
            return x + 1  #@v1
            return x + 2  #@v2


        CHAINED = mylib.chain([step])  # a library's factory closing over a list of the user's code
        WEIGHTED = mylib.weighted([1, 2])  #@v1
        WEIGHTED = mylib.weighted([1, 3])  #@v2


        @attrs.define
        class Listed:
            c = attrs.field(default=None, converter=attrs.converters.default_if_none([1, 2]))  #@v1
            c = attrs.field(default=None, converter=attrs.converters.default_if_none([1, 3]))  #@v2
    """,
    "mylib.py": """
        def chain(steps):
            def chained(x):
                for s in steps:
                    x = s(x)
                return x
            return chained


        def weighted(weights):  # closes over a list of numbers
            def total(x):
                return sum(w * x for w in weights)
            return total
    """,
    "main.py": """
        import fncache
        fncache.untrack("mylib")  # a library, as if installed
        from helpers import (CHAINED, SCALED, SCALED_BY, TABLE, WEIGHTED, Converted, Defaulted,
                             Frozen, Listed, Rooted, doubled, helper)


        @fncache.memoize
        @doubled
        def decorated(x):
            return x + 1


        @fncache.memoize
        def through_helper(x):
            return helper(x)


        @fncache.memoize
        def converted(x):
            return Converted(x).a


        @fncache.memoize
        def defaulted(x):
            return Defaulted().b * x


        @fncache.memoize
        def frozen(x):
            p = Frozen(x)
            return {p: p.a * p.k}[Frozen(x)]


        @fncache.memoize
        def table(x):
            return TABLE[0] * x


        @fncache.memoize
        def proxy_method(x):
            return SCALED.scaled()[x]


        @fncache.memoize
        def proxy_attribute(x):
            return SCALED_BY.scaled()[x]


        @fncache.memoize
        def ufunc_converter(x):
            return float(Rooted(x).v)


        @fncache.memoize
        def chained(x):
            return CHAINED(x)


        @fncache.memoize
        def weighted(x):
            return WEIGHTED(x)


        @fncache.memoize
        def listed(x):
            return Listed().c[1] * x


        CALLS = {
            "decorated": (decorated, (3,)),
            "through_helper": (through_helper, (3,)),
            "converted": (converted, (3,)),
            "defaulted": (defaulted, (3,)),
            "frozen": (frozen, (3,)),
            "table": (table, (3,)),
            "proxy_method": (proxy_method, (1,)),
            "proxy_attribute": (proxy_attribute, (1,)),
            "ufunc_converter": (ufunc_converter, (4.0,)),
            "chained": (chained, (3,)),
            "weighted": (weighted, (3,)),
            "listed": (listed, (3,)),
        }
    """,
}


def _write(dest: Path, files: dict[str, str], version: str) -> None:
    for rel, template in files.items():
        text = harness.render(textwrap.dedent(template).lstrip("\n"), version)
        if rel == "main.py":
            text += _FOOTER
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@functools.cache
def program_runs(program: str) -> dict[str, Any]:
    """Run one program as v1, v2, then v1 again at the same path; each in a fresh interpreter."""
    root = harness.tempdir(f"fncache-sound-{program}-")
    store, where = root / "cache", root / "project"
    runs = {}
    for name, version, seed in [("v1", "v1", 1), ("v2", "v2", 2), ("v1_again", "v1", 3)]:
        _write(where, PROGRAMS[program], version)
        runs[name] = harness.run_json(["main.py"], where, harness.child_env(store, seed))
    return runs


def _entries(main_template: str) -> list[str]:
    """The entry points a program's CALLS table names, in order."""
    body = main_template.split("CALLS = {", 1)[1]
    return [line.strip().split('"')[1] for line in body.splitlines() if line.strip().startswith('"')]


ENTRIES = [(p, e) for p, files in PROGRAMS.items() for e in _entries(files["main.py"])]


@pytest.mark.slow
@pytest.mark.parametrize("program", ["modules_as_values", "pydantic_models", "by_name_values",
                                     "pickle_drops", "body_imports_late",
                                     "library_named_classes", "mutual_recursion", "stdlib_state",
                                     "third_party_code", "module_rng"])
def test_keys_are_the_same_from_another_checkout(program):
    """A module counted whole (one of its imports holds a path) and a pydantic model give the same
    keys from another checkout folder, in another process with another hash seed."""
    keys = []
    for n, seed in ((1, 11), (2, 12)):
        root = harness.tempdir(f"fncache-checkout-{program}-{n}-")
        _write(root / "project", PROGRAMS[program], "v1")
        run = harness.run_json(["main.py"], root / "project", harness.child_env(root / "cache", seed))
        assert not [r for r in run.values() if "error" in r], run
        keys.append({entry: r["key"] for entry, r in run.items()})
    assert keys[0] == keys[1]


@pytest.mark.slow
@pytest.mark.parametrize(("program", "entry"), ENTRIES, ids=[f"{p}.{e}" for p, e in ENTRIES])
def test_edit_is_never_served_the_old_result(program, entry):
    """After an edit the result depends on, the call computes anew; undoing the edit hits again."""
    if program in _NEEDS:
        if _NEEDS[program] == "torch":
            from .helpers import import_torch

            import_torch()
    runs = program_runs(program)
    v1, v2, again = (runs[r][entry] for r in ("v1", "v2", "v1_again"))
    for run in (v1, v2, again):
        assert "error" not in run, f"{entry}: {run.get('error')}"
    assert not v1["hit"] and not v2["hit"]
    assert v2["result"] != v1["result"], f"{entry}: version 2 was served version 1's result"
    assert v2["key"] != v1["key"]
    assert again["key"] == v1["key"] and again["hit"], f"{entry}: version 1 did not hit again"
    assert again["result"] == v1["result"]


# ---------------------------------------------------------------------------------------------
# In-process rules and reports
# ---------------------------------------------------------------------------------------------

def test_a_closure_cell_still_empty_when_the_call_is_made_keys_and_hits(tmp_path):
    """A closure variable assigned after the function is made (its cell empty at the call): the
    call is keyed and hits; the check of an empty cell raised ``ValueError: Cell is empty``."""
    def outer():
        def f(x):
            return helper(x) if x > 5 else x

        cached = fncache.memoize(store=str(tmp_path / "s"))(f)
        results = [cached(1), cached(1)]
        helper = abs  # noqa: F841 - assigned after the calls: the cell stays empty until here
        return results, cached.cache_info()

    results, info = outer()
    assert results == [1, 1] and info.hits == 1


def test_function_attribute_set_in_process_changes_the_key(tmp_path):
    """Setting a helper's attribute in a running process gives a new key; setting it back, the old."""
    m = import_source("sound_fnattr", "def helper(x):\n    return x * helper.scale\n"
                      "helper.scale = 2\ndef f(x):\n    return helper(x)\n", tmp_path, keep=False)
    k1 = fncache.key_for(m.f, 1)
    m.helper.scale = 3
    k2 = fncache.key_for(m.f, 1)
    m.helper.extra = "new attribute"
    k3 = fncache.key_for(m.f, 1)
    del m.helper.extra
    m.helper.scale = 2
    assert len({k1, k2, k3}) == 3
    assert fncache.key_for(m.f, 1) == k1


def test_a_module_read_through_its_attributes_keys_what_the_code_reads_and_a_module_value_all(tmp_path):
    """``util.helper(x)`` keys ``util.helper`` only: another function of util may change and the
    key stays. The same module reached as a value (a default) or passed on keys every name it
    defines, and a name added to it later counts too."""
    import_source("sound_modval_util", "def helper(x):\n    return x + 1\n"
                  "def other():\n    return 1\n", tmp_path, keep=False)
    m = import_source("sound_modval_main", "import sound_modval_util as util\n"
                      "def read(x):\n    return util.helper(x)\n"
                      "def default(x, m=util):\n    return m.helper(x)\n"
                      "def use(m, x):\n    return m.helper(x)\n"
                      "def passed(x):\n    return use(util, x)\n", tmp_path, keep=False)
    util = m.util  # the module main imported (import_source leaves sys.modules as it was)
    before = {f: fncache.key_for(getattr(m, f), 1) for f in ("read", "default", "passed")}
    util.other = lambda: 2
    after = {f: fncache.key_for(getattr(m, f), 1) for f in ("read", "default", "passed")}
    assert after["read"] == before["read"]
    assert after["default"] != before["default"] and after["passed"] != before["passed"]
    util.extra = 3
    added = {f: fncache.key_for(getattr(m, f), 1) for f in ("read", "default", "passed")}
    assert added["read"] == before["read"]
    assert added["default"] != after["default"] and added["passed"] != after["passed"]
    del util.extra
    assert fncache.key_for(m.default, 1) == after["default"]


_STATE_JOB = """
import json, sys, uuid
import fncache

WEIGHTS = [3, 1, 2]  #@v1
WEIGHTS = [3, 1, 5]  #@v2
_session = None


def session():
    global _session
    if _session is None:
        _session = {"id": uuid.uuid4().hex}  # a lazily made object: new in every process
    return _session


@fncache.memoize(store=sys.argv[1])
def weighted(x):
    WEIGHTS.sort()  # state the function writes: keyed by name after the first call
    return [x * w for w in WEIGHTS]


@fncache.memoize(store=sys.argv[1])
def with_session(x):
    session()  # rebinds _session (through its helper): keyed by name from the start
    return x * 2


session()  # made before the first key in this process
out = {}
for f in (weighted, with_session):
    first = f(1)
    key = f.key(1)
    out[f.__name__] = [first, f(1), key, f.store.contains(key)]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_state_keyed_by_name_keeps_the_programs_first_value(tmp_path):
    """A global a function modifies (keyed by name after its first call) is keyed with the value
    the program gave it: editing that in the source is a miss in a new process, even for the calls
    after the first (all versions shared one key), and undoing the edit hits again. A global its
    code rebinds, made lazily before the first key, keeps one key across processes."""
    from tests.fixtures_code import harness

    runs = {}
    for name, version, seed in (("v1", "v1", "1"), ("v2", "v2", "2"), ("v1_again", "v1", "3")):
        write(tmp_path / "job.py", harness.render(textwrap.dedent(_STATE_JOB), version))
        runs[name] = last_json(run_py(tmp_path / "job.py", str(tmp_path / "store"), seed=seed))
    assert runs["v1"]["weighted"][:2] == [[1, 2, 3], [1, 2, 3]]
    assert runs["v2"]["weighted"][:2] == [[1, 3, 5], [1, 3, 5]]
    assert runs["v2"]["weighted"][2] != runs["v1"]["weighted"][2]
    # Version 1 again: its results, the second call's key found stored. (Its first call hits, so
    # the function never runs to modify WEIGHTS: that key stays the content's.)
    assert runs["v1_again"]["weighted"][:2] == runs["v1"]["weighted"][:2]
    assert runs["v1_again"]["weighted"][3]
    keys = {run["with_session"][2] for run in runs.values()}
    assert len(keys) == 1 and runs["v2"]["with_session"][3]  # one key; found in the next process


_STATE_NAMES_JOB = """
import json, sys
import fncache
from fncache.code.fingerprint import fingerprint

LOG = []
N = 0


def f(x):
    global N
    N += 1
    LOG.append(x)
    return x


g = fncache.memoize(store=sys.argv[1])(f)
g(1)
g(2)
third = g(2)
print(json.dumps([third, LOG, fingerprint(f).by_name]))
"""


@pytest.mark.slow
def test_state_listed_as_keyed_by_name(tmp_path):
    """The values keyed by name are listed with why (``Fingerprint.by_name``, what ``explain`` and
    ``doctor`` show). In a fresh interpreter: another thread would keep the modified value from
    being marked as the function's own state."""
    script = write(tmp_path / "names.py", _STATE_NAMES_JOB)
    third, log, by_name = last_json(run_py(script, str(tmp_path / "store")))
    assert third == 2 and log == [1, 2]  # the third call hit: LOG is keyed by name
    assert by_name == {"global LOG": "modified by the function", "global N": "rebound by the function"}


_TYPE_VARIABLE_JOB = """
import sys, typing
import fncache


def make():
    T = typing.TypeVar("T", bound=int)  #@v1
    T = typing.TypeVar("T", bound=str)  #@v2

    def f(x):
        return T.__name__ + str(x)
    return f


f = fncache.memoize(store=sys.argv[1])(make())
print(f.key(1))
"""


@pytest.mark.slow
def test_a_type_variable_a_function_reads_is_keyed_by_what_it_is(tmp_path):
    """A TypeVar made in a function (cloudpickle pickles it by value, with a tracker id new in
    every process) gives one key from another checkout and hash seed, and its bound counts."""
    from tests.fixtures_code import harness

    keys = []
    for where, version, seed in (("a", "v1", "1"), ("b", "v1", "2"), ("a", "v2", "3")):
        job = write(tmp_path / where / "job.py", harness.render(textwrap.dedent(_TYPE_VARIABLE_JOB),
                                                                version))
        keys.append(run_py(job, str(tmp_path / "store"), seed=seed).stdout.strip())
    assert keys[0] == keys[1] and keys[2] != keys[0]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 type parameters: Python 3.12+")
@pytest.mark.slow
def test_a_pep_695_type_parameter_read_by_the_code_keeps_its_key(tmp_path):
    """``def f[T](x)`` whose body reads ``T`` (a closure of the type parameter's scope) and a
    generic class's method that reads its parameter: the same key in another process and
    checkout (each process had a new one), and a bound edited is another key."""
    source = textwrap.dedent("""
        import sys
        import fncache

        def f[T: int](x):  #@v1
        def f[T: str](x):  #@v2
            return T.__name__ + str(x)

        class Box[U]:
            def name(self):
                return U.__name__

        def g(x):
            return Box().name() + str(x)

        store = sys.argv[1]
        print(fncache.memoize(store=store)(f).key(1), fncache.memoize(store=store)(g).key(1))
    """)
    from tests.fixtures_code import harness

    keys = []
    for where, version, seed in (("a", "v1", "1"), ("b", "v1", "2"), ("a", "v2", "3")):
        job = write(tmp_path / where / "job.py", harness.render(source, version))
        keys.append(run_py(job, str(tmp_path / "store"), seed=seed).stdout.split())
    assert keys[0] == keys[1]
    assert keys[2][0] != keys[0][0] and keys[2][1] == keys[0][1]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 type parameters: Python 3.12+")
@pytest.mark.slow
def test_pep_695_globals_read_in_a_local_class_or_by_reflection_are_keyed(tmp_path):
    """A class defined in the function reads a global in a ``type`` alias or a type parameter's
    bound with an instruction of its own (``LOAD_FROM_DICT_OR_GLOBALS``), and a function's type
    parameters read by reflection (``g.__type_params__``) name their bound only there: editing
    the global is a miss (v2 computes its own result), v1 again at the same path hits with its
    first key, and another checkout and hash seed give the same keys."""
    source = textwrap.dedent("""
        import json
        import sys
        import fncache

        class Helper:
            K = 1  #@v1
            K = 2  #@v2

        class Bound:
            K = 1  #@v1
            K = 2  #@v2

        def generic[T: Bound](x):
            return x

        def local_alias(x):
            class C:
                type B = Helper
            return C.B.__value__.K * x

        def local_generic_method(x):
            class C:
                def m[T: Helper](self, y):
                    return T.__bound__.K * y
            return C().m(x)

        def reflected(x):
            return generic.__type_params__[0].__bound__.K * x

        memo = fncache.memoize(store=sys.argv[1])
        fns = [memo(local_alias), memo(local_generic_method), memo(reflected)]
        print(json.dumps([[f.key(3), f.store.contains(f.key(3)), f(3)] for f in fns]))
    """)
    from tests.fixtures_code import harness

    runs = []
    for where, version, seed in (("a", "v1", "1"), ("a", "v2", "2"), ("a", "v1", "3"),
                                 ("b", "v1", "4")):
        job = write(tmp_path / where / "job.py", harness.render(source, version))
        runs.append(json.loads(run_py(job, str(tmp_path / "store"), seed=seed).stdout))
    v1, v2, again, moved = runs
    assert [r[2] for r in v1] == [3, 3, 3] and [r[2] for r in v2] == [6, 6, 6]
    assert all(not a[1] and a[0] != b[0] for a, b in zip(v2, v1, strict=True))
    assert again == [[k, True, 3] for k, _, _ in v1] and moved == again


def test_only_the_strings_of_nested_annotations_name_globals(tmp_path):
    """A function that defines an annotated function or class reads the globals its annotation
    strings name, and no other string of its code does: a dict key spelled like a global the
    function writes (a call counter) or never reads (a large array) is no input, so calls still
    hit and the array is not keyed; a string too deeply nested for the parser names nothing."""
    m = import_source("sound_nested_strings", "from __future__ import annotations\n"
                      "calls = 0\n"
                      "data = [1, 2, 3]\n"
                      "class Unit:\n    scale = 2\n"
                      "def f(x):\n"
                      "    global calls\n"
                      "    calls += 1\n"
                      "    def inner(a: Unit) -> int:\n        return a\n"
                      "    class Local:\n        u: Unit\n"
                      f"        v: '{'a' + '.b' * 5000}'\n"
                      "    return {'calls': x, 'data': x}\n", tmp_path, keep=True)
    f = fncache.memoize(store=str(tmp_path / "s"))(m.f)
    for _ in range(3):
        f(1)
    assert f.cache_info().hits == 2 and m.calls == 1
    before = fncache.key_for(m.f, 1)
    m.data.append(4)
    assert fncache.key_for(m.f, 1) == before
    m.Unit = type("Unit", (), {"scale": 3})
    assert fncache.key_for(m.f, 1) != before
    # An annotation that branches (strings written out, no __future__ import): where its value
    # begins is not told by the stack alone, and every string of the code counts then.
    b = import_source("sound_branching_annotation", "import typing\n"
                      "FLAG = True\n"
                      "class Unit:\n    scale = 2\n"
                      "class Other:\n    scale = 3\n"
                      "def f(x):\n"
                      "    def inner(a: 'Other') -> ('Unit' if FLAG else 'Other'):\n        return a\n"
                      "    class Local:\n        u: 'Unit' if FLAG else 'Other'\n"
                      "    return typing.get_type_hints(inner)['return'].scale, "
                      "typing.get_type_hints(Local)['u'].scale\n", tmp_path, keep=True)
    assert b.f(1) == (2, 2)
    before = fncache.key_for(b.f, 1)
    b.Unit = type("Unit", (), {"scale": 4})
    assert b.f(1) == (4, 4) and fncache.key_for(b.f, 1) != before


def test_annotations_rebound_in_process_change_the_key_and_evaluating_them_does_not(tmp_path):
    """Annotations rebound in the running process give a new key, put back the old one; evaluating
    them (``get_type_hints`` fills the evaluation cache of the ``ForwardRef`` that typing shares
    among all annotations spelled alike) changes nothing."""
    import typing

    m = import_source("sound_annotations", "from typing import List\n"
                      "class User:\n    pass\n"
                      "def helper(x: int):\n    return x\n"
                      "def other(users: List['User']):\n    return users\n"
                      "def f(raw, users: List['User'] = ()):\n"
                      "    return helper(helper.__annotations__['x'](raw))\n",
                      tmp_path, keep=True)
    before = fncache.key_for(m.f, "3")
    typing.get_type_hints(m.other)
    assert fncache.key_for(m.f, "3") == before
    kept = m.helper.__annotations__
    m.helper.__annotations__ = {"x": str}
    assert fncache.key_for(m.f, "3") != before
    m.helper.__annotations__ = kept
    assert fncache.key_for(m.f, "3") == before


def test_a_dataclass_default_factory_reading_a_rebound_global_changes_the_key(tmp_path):
    """The code a dataclass's default factory runs is read through the generated ``__init__``: a
    global that code reads, rebound in the running process (a notebook cell run again), is a new
    key, as for any function. A hit re-hashes neither the class's fields whole nor dataclasses'
    sentinels."""
    m = import_source("sound_dataclass_factory", "import dataclasses\n"
                      "SCALE = 2\n"
                      "def make():\n    return [SCALE]\n"
                      "@dataclasses.dataclass\n"
                      "class C:\n    xs: list = dataclasses.field(default_factory=make)\n"
                      "def f(x):\n    return C().xs + [x]\n", tmp_path, keep=True)
    before = fncache.key_for(m.f, 1)
    # On every hit: not the fields whole nor dataclasses' sentinels, only what can change in place.
    rehashed = fingerprint(m.f)._mutable_where
    assert "class attribute C.__dataclass_fields__" not in rehashed
    assert [w for w in rehashed if "FACTORY" in w or "a default" in w or "_field_type" in w] == []
    m.SCALE = 3
    assert fncache.key_for(m.f, 1) != before
    m.SCALE = 2
    assert fncache.key_for(m.f, 1) == before


def test_a_dataclass_changed_in_place_in_the_running_process_changes_the_key(tmp_path):
    """A dataclass changed in place in the running process: a field's ``metadata`` (a function in
    it reading a rebound global, a list in it mutated), a field's attribute set in place, the
    fields reordered, the class's annotations changed in place (and a ``ref`` given to a library
    class they name), its parameters: each is a new key."""
    import argparse

    m = import_source("sound_dataclass_in_place", "import dataclasses, typing\n"
                      "LIMIT = 0\n"
                      "CHOICES = ['a']\n"
                      "def check(v):\n    return v > LIMIT\n"
                      "@dataclasses.dataclass\n"
                      "class C:\n"
                      "    x: int = dataclasses.field(default=1, metadata={'check': check})\n"
                      "    y: str = dataclasses.field(default='a', metadata={'choices': CHOICES})\n"
                      "def f():\n"
                      "    fx, fy = dataclasses.fields(C)\n"
                      "    return (fx.metadata['check'](0), len(fy.metadata['choices']), str(fx.type),\n"
                      "            str(typing.get_type_hints(C)), C.__dataclass_params__.order)\n",
                      tmp_path, keep=True)
    keys = [fncache.key_for(m.f)]
    m.LIMIT = -1
    keys.append(fncache.key_for(m.f))
    m.CHOICES.append("b")
    keys.append(fncache.key_for(m.f))
    m.C.__dataclass_fields__["x"].type = float
    keys.append(fncache.key_for(m.f))
    m.C.__annotations__["y"] = bytes
    keys.append(fncache.key_for(m.f))
    m.C.__dataclass_params__.order = True
    keys.append(fncache.key_for(m.f))
    fields = m.C.__dataclass_fields__
    fields["x"] = fields.pop("x")  # the same fields in another order (``fields()`` follows it)
    keys.append(fncache.key_for(m.f))
    holder = types.SimpleNamespace(tag="a")
    fields["y"].type = holder  # an object set in place, then changed in place
    keys.append(fncache.key_for(m.f))
    holder.tag = "b"
    keys.append(fncache.key_for(m.f))
    m.C.__annotations__["z"] = argparse.Namespace  # a library class, keyed by name...
    keys.append(fncache.key_for(m.f))
    fncache.ref(argparse.Namespace, "given later")  # ...until a ref() keys it
    try:
        keys.append(fncache.key_for(m.f))
    finally:
        from fncache.values import registry

        registry.refs.pop(id(argparse.Namespace), None)
    assert len(set(keys)) == len(keys), keys


def test_in_process_changes_to_wrappers_context_vars_and_weak_dicts_are_new_keys(tmp_path):
    """In one process (a notebook): an attribute set on a memoized function (read by itself or a
    caller) or on an ``lru_cache`` wrapper, a ``ContextVar`` set, a ``WeakValueDictionary`` given an
    item: each read by the code, each was keyed by what stood before (or by its type alone)."""
    m = import_source("sound_wrappers_in_process", "import contextvars, functools, weakref\n"
                      "import fncache\n"
                      "class Obj:\n    pass\n"
                      "KEEP = [Obj(), Obj()]\n"
                      "REG = weakref.WeakValueDictionary({'a': KEEP[0]})\n"
                      "MODE = contextvars.ContextVar('mode', default='fast')\n"
                      "@functools.lru_cache\n"
                      "def lru(x):\n    return x\n"
                      "@fncache.memoize\n"
                      "def own(x):\n    return x * getattr(own, 'scale', 1)\n"
                      "def f(x):\n"
                      "    return (own(x), getattr(lru, 'scale', 1), MODE.get(), sorted(REG))\n",
                      tmp_path, keep=True)
    results, keys = [], []
    for change in (lambda: None, lambda: setattr(m.own, "scale", 3),
                   lambda: setattr(m.lru, "scale", 3), lambda: m.MODE.set("exact"),
                   lambda: m.REG.__setitem__("b", m.KEEP[1])):
        change()
        keys.append((fncache.key_for(m.f, 2), fncache.key_for(m.own, 2)))
        results.append(m.f(2))
    assert len({k for k, _ in keys}) == len(keys), keys
    assert keys[0][1] != keys[1][1]  # the memoized function reading its own attribute
    assert results[-1] == (6, 3, "exact", ["a", "b"])


def test_string_annotations_naming_prose_or_an_unkeyable_global_keep_the_function_keyable(tmp_path):
    """An annotation string that is no expression names nothing; one naming a global no key can
    hold (a lock) is keyed by that global's type; a rebinding of a named global is a new key."""
    m = import_source("sound_string_annotations", "import threading\n"
                      "GUARD = threading.Lock()\n"
                      "class K:\n    pass\n"
                      "def f(x: 'a positive number', lock: 'GUARD' = None, k: 'K' = None):\n"
                      "    return x\n", tmp_path, keep=True)
    before = fncache.key_for(m.f, 3)
    assert fncache.key_for(m.f, 3) == before
    kept = m.K
    m.K = type("K", (), {"extra": 1})
    assert fncache.key_for(m.f, 3) != before
    m.K = kept
    assert fncache.key_for(m.f, 3) == before


def test_what_an_enum_member_or_a_base_holds_that_nothing_keys_is_keyed_by_type(tmp_path):
    """An enum member holding an object no pickle takes (a rate limiter with a lock), or a base
    made by ``__mro_entries__`` holding one, keeps the function keyable, as before these were keyed."""
    import threading

    m = import_source("sound_member_lock", "import enum, threading\n"
                      "class Limiter:\n    def __init__(self, n):\n"
                      "        self.n = n\n        self.lock = threading.Lock()\n"
                      "class Provider(enum.Enum):\n    FAST = 100\n"
                      "    def __init__(self, n):\n        self.limiter = Limiter(n)\n"
                      "def price(provider, n):\n    return n * (0.1 if provider is Provider.FAST else 0.5)\n"
                      "def read(n):\n    return Provider.FAST.limiter.n + n\n",
                      tmp_path, keep=False)
    g = fncache.memoize(store=str(tmp_path / "store"))(m.price)
    assert g(m.Provider.FAST, 3) == g(m.Provider.FAST, 3) and g.cache_info().hits == 1
    assert fncache.key_for(m.read, 1)

    class Registry:
        def __init__(self):
            self.lock = threading.Lock()

        def __mro_entries__(self, bases):
            return (object,)

    registry = Registry()

    class Model(registry):  # type: ignore[misc]
        def size(self):
            return 1

    def uses(n):
        return Model().size() + n

    assert fncache.key_for(uses, 1)


def test_a_pydantic_model_keeps_its_key_when_pydantic_fills_its_caches(tmp_path):
    """Setting an attribute of a model's instance fills a cache in the class's dict
    (``__pydantic_setattr_handlers__``): not the model's code, so the key stays; a field's
    default changed in the running process changes it."""
    pytest.importorskip("pydantic")
    m = import_source("sound_pydantic", "import pydantic\n"
                      "class P(pydantic.BaseModel):\n    a: int = 1\n"
                      "def f(k):\n    return P().a + k\n", tmp_path, keep=False)
    before = fncache.key_for(m.f, 1)
    p = m.P()
    p.a = 5
    assert "a" in m.P.__dict__["__pydantic_setattr_handlers__"]
    assert fncache.key_for(m.f, 1) == before
    m.P.model_fields["a"].default = 2
    m.P.model_rebuild(force=True)
    changed = fncache.key_for(m.f, 1)
    m.P.model_fields["a"].default = 1
    m.P.model_rebuild(force=True)
    assert changed != before and fncache.key_for(m.f, 1) == before


def test_a_module_counted_whole_keys_a_value_it_cannot_pickle_by_name_and_reports_it(tmp_path):
    """A module reached as a value whose client object cannot be pickled: the call is keyed (no
    error), the client by its type and the name it is read under, listed as keyed by name (what
    ``fncache doctor`` reports); read off a global, code that never reads the client is not
    affected by it."""
    m = import_source("sound_modval_client", "import threading\n"
                      "class Client:\n    def __init__(self):\n        self.lock = threading.Lock()\n"
                      "CLIENT = Client()\n"
                      "def helper(x):\n    return x + 1\n"
                      "def default(x, m=None):\n    return m.helper(x)\n", tmp_path, keep=False)
    m.default.__defaults__ = (m,)  # the module itself as the default
    fp = fingerprint(m.default)
    assert any("CLIENT" in item and "Client" in item for item in fp.infrastructure), fp.infrastructure
    key = fncache.key_for(m.default, 1)
    m.helper = lambda x: x + 2  # still the rest of the module counts
    assert fncache.key_for(m.default, 1) != key


def test_names_passed_on_are_the_loads_not_followed_by_an_attribute_read():
    """What ``names_passed_on`` finds in real bytecode, on this interpreter: a global or closure
    variable loaded and passed, returned or stored, never one only read through (``m.x``)."""
    from fncache.code.digest import names_passed_on

    def outer(m, n):
        def inner():
            return g(m) + n.value

        return inner

    def g(x):
        return x

    ns: dict[str, Any] = {}
    exec("def f():\n    a.b.c()\n    return g(d) + e.f + h\n", ns)
    assert names_passed_on(ns["f"].__code__) >= {"g", "d", "h"}
    assert not names_passed_on(ns["f"].__code__) & {"a", "e"}
    inner = outer(1, 2)
    assert "m" in names_passed_on(inner.__code__) and "n" not in names_passed_on(inner.__code__)


_SERVICE = """
import threading

class Service:
    def __init__(self):
        self.lock = threading.Lock()
        self.threshold = 3

SERVICE = Service()
LOCK = threading.Lock()

def f(x):
    return x > SERVICE.threshold

def g(x):
    with LOCK:
        return x
"""


def test_a_value_that_cannot_be_keyed_is_named_with_the_fixes(tmp_path):
    """A user object holding a lock is data, not infrastructure: the error names the global and the fixes."""
    m = import_source("sound_service", _SERVICE, tmp_path, keep=False)
    with pytest.raises(fncache.UnhashableArgument) as info:
        fncache.key_for(m.f, 1)
    message = str(info.value)
    assert "global SERVICE" in message
    for fix in ("fncache.ref", "fncache.register", "version="):
        assert fix in message


def test_infrastructure_is_keyed_by_name_and_logged_once(tmp_path, caplog):
    """A module-level lock is keyed by type and name, reported on the fingerprint, logged once at INFO."""
    m = import_source("sound_lock", _SERVICE, tmp_path, keep=False)
    with caplog.at_level(logging.INFO, logger="fncache"):
        k1 = fncache.key_for(m.g, 1)
        assert fncache.key_for(m.g, 1) == k1
        m.LOCK = threading.Lock()  # another lock object: still the same infrastructure
        assert fncache.key_for(m.g, 1) == k1
    assert fingerprint(m.g).infrastructure == ("global LOCK (_thread.lock)",)
    assert fingerprint(m.g).by_name == {
        "global LOCK (_thread.lock)": "cannot be pickled: keyed by type and name"}
    notes = [r for r in caplog.records if "global LOCK" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO


@pytest.mark.slow
def test_doctor_reports_what_is_keyed_by_name(tmp_path):
    """fncache doctor lists the globals a function's key holds by type and name, not content."""
    job = write(tmp_path / "job.py", """
        import logging
        import threading

        import fncache

        LOCK = threading.Lock()
        HANDLER = logging.StreamHandler()


        @fncache.memoize
        def guarded(x):
            with LOCK:
                HANDLER.flush()
                return x


        @fncache.memoize
        def plain(x):
            return x
    """)
    checks = {}
    for name in ("guarded", "plain"):
        proc = subprocess.run([sys.executable, "-m", "fncache", "doctor", "--dir", str(tmp_path / "c"),
                               f"{job}:{name}", "--json"], capture_output=True, text=True, timeout=300,
                              env=harness.child_env())
        assert proc.returncode in (0, 1) and not doctor_failed(proc), proc.stdout + proc.stderr
        checks[name] = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["keyed by name"]
    assert "global LOCK (_thread.lock)" in checks["guarded"]["detail"]
    assert "global HANDLER (logging.StreamHandler)" in checks["guarded"]["detail"]
    assert "content" in checks["plain"]["detail"] and "LOCK" not in checks["plain"]["detail"]


# -- 14. one digest for a class before and after Python caches things in it ---------------------

def _fresh_classes() -> list[type]:
    """New class objects on every call, so every example starts with no run-time caches."""

    class Base(abc.ABC):
        @abc.abstractmethod
        def f(self, x): ...

    class Impl(Base):
        def f(self, x):
            return x * 2

    class SupportsClose(typing.Protocol):
        def close(self) -> None: ...

    @typing.runtime_checkable
    class Closable(typing.Protocol):
        def close(self) -> None: ...

    class Closer(SupportsClose):
        def close(self) -> None:
            return None

    class Bag(collections.abc.Mapping):  # type: ignore[type-arg]
        def __init__(self, items=()):
            self._items = dict(items)

        def __getitem__(self, key):
            return self._items[key]

        def __iter__(self):
            return iter(self._items)

        def __len__(self):
            return len(self._items)

    class Lazy:
        lock = threading.Lock()

        @functools.cached_property
        def double(self):
            return 2

    return [Base, Impl, SupportsClose, Closable, Closer, Bag, Lazy]


def _touch(op: str, classes: list[type]) -> None:
    """One thing ordinary code does with classes that makes Python cache something in them."""
    base, impl, _, closable, closer, bag, lazy = classes
    if op == "pickle":
        for cls in (impl, closer, bag):
            cloudpickle.dumps(cls())  # copyreg fills __slotnames__
    elif op == "copy":
        for cls in (impl, closer, bag, lazy):
            copy.copy(cls())
            copy.deepcopy(cls())
    elif op == "isinstance":
        isinstance(impl(), base)
        isinstance(closer(), closable)
        isinstance({}, bag)
        issubclass(dict, bag)
    elif op == "register":
        base.register(int)
        bag.register(dict)
    elif op == "cached_property":
        assert lazy().double == 2


@given(st.lists(st.sampled_from(["pickle", "copy", "isinstance", "register", "cached_property"]),
                max_size=6))
@settings(max_examples=25, deadline=None)
def test_class_digest_ignores_run_time_caches(ops):
    """Pickling, copying, isinstance, ABC.register and cached_property never change a class's digest."""
    classes = _fresh_classes()
    before = [fingerprint(c).digest for c in classes]
    for op in ops:
        _touch(op, classes)
    assert [fingerprint(c).digest for c in classes] == before
    assert [_hasher.digest(c) for c in classes] == [_hasher.digest(c) for c in _fresh_classes()]


_ROUND_TRIP = """
import abc, collections.abc, json, sys, typing

import cloudpickle

from fncache.code.fingerprint import fingerprint

if sys.argv[1] == "dump":
    class Base(abc.ABC):
        @abc.abstractmethod
        def f(self, x): ...

    class Impl(Base):
        def f(self, x):
            return x * 2

    class SupportsClose(typing.Protocol):
        def close(self) -> None: ...

    class Closer(SupportsClose):
        def close(self):
            return None

    class Bag(collections.abc.Mapping):
        def __getitem__(self, key):
            return 1

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

    FACTOR = 3

    def helper(x):
        return x + FACTOR

    class Scaled(Base):
        def f(self, x):
            return helper(x) * FACTOR

    def uses(x):
        return Scaled().f(x)

    classes = [Base, Impl, SupportsClose, Closer, Bag, Scaled, uses]
    Base.register(int)
    with open(sys.argv[2], "wb") as f:
        cloudpickle.dump(classes, f)
else:
    with open(sys.argv[2], "rb") as f:
        classes = cloudpickle.load(f)
print(json.dumps([fingerprint(c).digest.hex() for c in classes]))
"""


@pytest.mark.slow
def test_class_digest_survives_a_cloudpickle_round_trip_to_another_process(tmp_path):
    """Classes built on ABC, Protocol and collections.abc (and their globals) keep their digest elsewhere."""
    script = write(tmp_path / "round_trip.py", _ROUND_TRIP)
    payload = str(tmp_path / "classes.pkl")
    env = {"PYTHONPATH": str(harness.REPO)}
    dumped = last_json(run_py(script, "dump", payload, env=env, seed="1"))
    loaded = last_json(run_py(script, "load", payload, env=env, seed="2"))
    assert loaded == dumped


def test_an_argument_that_cannot_be_keyed_is_named_with_the_fixes():
    """An unpicklable argument's error names the parameter and says how to key it."""

    def f(conn, x):
        return x

    with pytest.raises(fncache.UnhashableArgument) as info:
        fncache.key_for(f, threading.Lock(), 1)
    assert info.value.parameter == "conn"
    assert "'conn'" in str(info.value)
    for fix in ("fncache.ref", "fncache.register"):
        assert fix in str(info.value)


def test_two_namespaces_with_one_name_get_their_own_labels(tmp_path):
    """Globals of two run_path namespaces (both ``<run_path>``) are two components, in visiting order."""
    import runpy

    for name, scale in (("a", 2), ("b", 100)):
        write(tmp_path / f"plugin_{name}.py", f"SCALE = {scale}\ndef apply(x):\n    return x * SCALE\n")
    first = runpy.run_path(str(tmp_path / "plugin_a.py"))["apply"]
    second = runpy.run_path(str(tmp_path / "plugin_b.py"))["apply"]

    def both(x):
        return first(x) + second(x)

    comps = fingerprint(both).components
    assert comps["global <run_path>.SCALE"] != comps["global <run_path>#2.SCALE"]
    assert {"function <run_path>.apply", "function <run_path>.apply#2"} <= set(comps)


@pytest.mark.slow
def test_a_library_imported_in_the_body_is_keyed_by_name_before_and_after_it_runs(tmp_path):
    """A lazily imported library gives one key before its first import and after; it is not imported early."""
    script = write(tmp_path / "lazy_lib.py", """
        import json
        import sys

        import fncache


        @fncache.memoize(store="memory://")
        def f(x):
            import colorsys
            return colorsys.rgb_to_hsv(x, x, x)


        before = f.key(1)
        imported_early = "colorsys" in sys.modules
        f(1)
        print(json.dumps({"same": before == f.key(1), "imported_early": imported_early,
                          "components": sorted(f._fingerprint().components)}))
    """)
    out = last_json(run_py(script, env={"PYTHONPATH": str(harness.REPO)}))
    assert out["same"] and not out["imported_early"]
    assert "import colorsys" in out["components"]


def test_what_a_helper_held_in_a_value_keys_by_name_is_reported_too(tmp_path):
    """A helper reached through a dict of functions passes its by-name items up to the root's report."""
    m = import_source("sound_nested", "import threading\nLOCK = threading.Lock()\n"
                      "def locked(x):\n    with LOCK:\n        return x\n"
                      "HANDLERS = {'a': locked}\n"
                      "def f(x):\n    return HANDLERS['a'](x)\n", tmp_path, keep=False)
    assert fingerprint(m.f).infrastructure == ("locked: global LOCK (_thread.lock)",)


# -- numba dispatchers reached through values ----------------------------------------------------
NUMBA_PROGRAM = {
    "jitted.py": """
        import numba


        @numba.njit
        def h(x):
            return x * 2  #@v1
            return x * 3  #@v2


        @numba.njit(fastmath=True)
        def k(x):
            return x + 0.5  #@v1
            return x + 1.5  #@v2
    """,
    "main.py": """
        import fncache
        import jitted

        OPS = {"h": jitted.h, "k": jitted.k}


        @fncache.memoize
        def dispatch_dict(x):
            return OPS["h"](x) + OPS["k"](x)


        @fncache.memoize
        def argument(fn, x):
            return fn(x)


        CALLS = {
            "dispatch_dict": (dispatch_dict, (5,)),
            "argument": (argument, (jitted.h, 5)),
        }
    """,
}


@pytest.mark.slow
def test_numba_dispatchers_in_values_hit_in_another_process_and_follow_edits():
    """A numba dispatcher in a dict or passed as an argument is keyed by its Python code and compile
    options: a second process hits (not a per-process id), an edit computes anew, undoing it hits."""
    pytest.importorskip("numba")
    root = harness.tempdir("fncache-sound-numba-")
    store, where = root / "cache", root / "project"
    runs = []
    for version, seed in [("v1", 1), ("v1", 2), ("v2", 3), ("v1", 4)]:
        _write(where, NUMBA_PROGRAM, version)
        runs.append(harness.run_json(["main.py"], where, harness.child_env(store, seed)))
    entries = _entries(NUMBA_PROGRAM["main.py"])
    assert entries == ["dispatch_dict", "argument"]
    for entry in entries:
        first, second, edited, again = (r[entry] for r in runs)
        for run in (first, second, edited, again):
            assert "error" not in run, f"{entry}: {run.get('error')}"
        assert not first["hit"] and second["hit"] and second["key"] == first["key"], entry
        assert not edited["hit"] and edited["result"] != first["result"], entry
        assert again["hit"] and again["key"] == first["key"], entry


def test_numba_dispatcher_is_keyed_by_compile_options_not_compiled_signatures():
    """njit(f) and njit(fastmath=True)(f) give different digests; compiling a call does not change
    a dispatcher's digest, and a dispatcher counts by its Python function's code."""
    numba = pytest.importorskip("numba")

    def f(x):
        return x * 2.0

    def g(x):
        return x * 3.0

    plain, fast = numba.njit(f), numba.njit(fastmath=True)(f)
    before = fncache.hash([plain])
    assert plain(1.0) == 2.0 and plain(1) == 2.0  # two signatures compiled
    assert fncache.hash([plain]) == before
    assert fncache.hash([fast]) != before
    assert fncache.hash([numba.njit(g)]) != before
    assert fncache.hash([numba.njit(f)]) == before


_BY_NAME_LOOP = """
import json, sys
import fncache

@fncache.memoize(store="memory://by-name-loop")
def helper(x):
    return x + SETTINGS.k

class Settings:
    def __init__(self, k):
        self.k = k
        self.hook = helper

    def __reduce__(self):
        return "SETTINGS"

SETTINGS = Settings(int(sys.argv[2]))
if sys.argv[1] == "settings-first":
    fncache.hash(SETTINGS)
print(json.dumps(helper.key(1)))
"""


@pytest.mark.slow
def test_a_by_name_instance_holding_a_function_that_reads_it_keys_alike_run_after_run(tmp_path):
    """The one order-dependent case of by-name content (documented): each order keys alike in fresh
    processes with other hash seeds, and an edit of the instance's attribute changes the key in
    both orders."""
    script = tmp_path / "loop.py"
    script.write_text(_BY_NAME_LOOP)
    for order in ("helper-first", "settings-first"):
        keys = {(k, seed): last_json(run_py(script, order, k, seed=seed))
                for k in ("1", "5") for seed in ("1", "2")}
        assert keys[("1", "1")] == keys[("1", "2")] and keys[("5", "1")] == keys[("5", "2")], order
        assert keys[("1", "1")] != keys[("5", "1")], order


def test_hooks_no_key_can_hold_are_keyed_by_the_code_they_run(tmp_path):
    """A callable holding a lock where a library keeps it (a partial of the user's function in a
    library's dispatch registry, an instance of the user's class as a builtin or a decoder's hook)
    is keyed by the user code it runs and what it holds but the lock: the function stays keyable,
    and an edit of that code or data (in the source, or in the running process) is a new key. A
    hook holding the decoder it is the hook of is keyed once; an object whose attributes raise when
    read (a context-local proxy) is no hook."""
    import builtins

    import_source("hooklib", "import functools\n"
                  "@functools.singledispatch\n"
                  "def label(x):\n    return 'lib'\n", tmp_path)
    fncache.untrack("hooklib")
    source = ("import builtins, functools, json, threading\n"
              "import hooklib\n"
              "class Proxy:  # as werkzeug's LocalProxy with nothing bound\n"
              "    @property\n"
              "    def __dict__(self):\n        raise RuntimeError('object is not bound')\n"
              "    def __call__(self, *args):\n        raise RuntimeError('object is not bound')\n"
              "def impl(lock, x):\n    return 'one'\n"
              "class Translator:\n"
              "    def __init__(self, mark):\n"
              "        self.lock, self.mark = threading.Lock(), mark\n"
              "    def __call__(self, text):\n        return text + self.mark\n"
              "hooklib.label.register(int, functools.partial(impl, threading.Lock()))\n"
              "builtins._hook_translate = Translator('!')\n"
              "DECODER = json.JSONDecoder(object_hook=Translator('!'))\n"
              "PROXIED = json.JSONDecoder(object_hook=Proxy())\n"
              "class Parser:  # a hook holding the decoder it is the hook of\n"
              "    def __init__(self):\n"
              "        self.lock = threading.Lock()\n"
              "        self.decoder = json.JSONDecoder(object_hook=self.hook)\n"
              "    def hook(self, d):\n        return d\n"
              "OWN = Parser().decoder\n"
              "def f(x):\n"
              "    return (hooklib.label(x), _hook_translate('a'), type(DECODER), type(PROXIED),\n"
              "            type(OWN))\n")
    try:
        m = import_source("hookuser", source, tmp_path)
        before = fncache.key_for(m.f, 1)
        assert fncache.key_for(m.f, 1) == before
        m.DECODER.object_hook.mark = "?"  # in this process: its data changed
        assert fncache.key_for(m.f, 1) != before
        m.DECODER.object_hook.mark = "!"
        assert fncache.key_for(m.f, 1) == before
        m = import_source("hookuser", source.replace("return 'one'", "return 'two'"), tmp_path)
        assert fncache.key_for(m.f, 1) != before
        for edit in (("text + self.mark", "self.mark + text"),  # the code a hook runs
                     ("_hook_translate = Translator('!')", "_hook_translate = Translator('?')"),
                     ("object_hook=Translator('!')", "object_hook=Translator('?')")):  # its data
            m = import_source("hookuser", source.replace(*edit), tmp_path)
            assert fncache.key_for(m.f, 1) != before, edit
        m = import_source("hookuser", source, tmp_path)
        assert fncache.key_for(m.f, 1) == before
    finally:
        fncache.track("hooklib")
        vars(builtins).pop("_hook_translate", None)
