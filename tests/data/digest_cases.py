"""Values whose digests must not depend on the process, the hash seed or the checkout path.

Run as a script: ``python digest_cases.py [dump FILE | load FILE]`` prints a JSON object mapping each
case to ``fncache.hash`` of it. ``dump`` also writes the dynamic objects with cloudpickle; ``load``
hashes those round-tripped objects instead of fresh ones.
"""

import dataclasses
import enum
import functools
import json
import pathlib
import sys

import cloudpickle

import fncache

THRESHOLD = 3


class Interned:
    """A string attribute equal to a method name trips interning-dependent memoization."""

    arg_1 = "join"

    def join(self, arg_1):
        return arg_1


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    tags: list = dataclasses.field(default_factory=list)

    def norm(self):
        return (self.x**2 + self.y**2) ** 0.5


class Color(enum.Enum):
    RED = 1
    GREEN = 2

    def describe(self):
        return self.name.lower()


def helper(x):
    return x * THRESHOLD


def uses_helper(x, scale=2.0, *, flags=frozenset({"a", "b", "c"})):
    return helper(x) * scale if x in {"p", "q", "r", 1, 2.5} else flags


def make_closure(k):
    table = {"alpha": k, "beta": {k, k + 1}}

    def inner(x):
        return table["alpha"] + x

    return inner


exec_ns: dict = {}
exec("def from_exec(a, b=1):\n    return [a, b, {'s', 't'}]\n", exec_ns)


def dynamic_objects():
    return {
        "function": uses_helper,
        "closure": make_closure(5),
        "lambda": lambda v, w=(1, 2): (v, w, {"x", "y"}),
        "partial": functools.partial(uses_helper, scale=3.0),
        "exec": exec_ns["from_exec"],
        "class_interned": Interned,
        "class_dataclass": Point,
        "class_enum": Color,
    }


def values():
    runtime_str = "".join(["jo", "in"])
    return {
        "int": 1,
        "float": 1.0,
        "bool": True,
        "neg_zero": -0.0,
        "zero": 0.0,
        "str": "1",
        "bytes": b"1",
        "list": [1],
        "tuple": (1,),
        "big_int": 2**200,
        "unicode": "fünf ✓",
        "dict_ab": {"a": 1, "b": 2},
        "dict_ba": {"b": 2, "a": 1},
        "set_str": {f"k{i}" for i in range(50)},
        "set_mixed": {1, "a", 2.5, (1, 2), frozenset({"x", "y"}), None, b"z"},
        "set_nested": frozenset({frozenset({"a", "b"}), frozenset({"c"}), frozenset()}),
        "dict_of_sets": {"s": {"u", "v", "w"}, "t": [frozenset({1, 2, 3})]},
        "interning_shared": ["join", "join"],
        "interning_runtime": ["join", runtime_str],
        "instance_interned": Interned(),
        "instance_dataclass": Point(1.0, 2.0, ["t"]),
        "enum_member": Color.GREEN,
        "code": uses_helper.__code__,
        # Equal paths spelled three ways (from 3.12 a path pickles its spelling) and two that differ.
        "path_plain": pathlib.PurePosixPath("data/raw"),
        "path_doubled": pathlib.PurePosixPath("data//raw/"),
        "path_parts": pathlib.PurePosixPath("data", "raw"),
        "path_other": pathlib.PurePosixPath("data/raw2"),
        "path_absolute": pathlib.PurePosixPath("/data/raw"),
        "path_concrete": pathlib.Path("data/./raw"),
    }


def numpy_values():
    try:
        import numpy as np
    except ImportError:
        return {}
    a = np.arange(24, dtype="float64").reshape(4, 6)
    return {
        "np_c": a,
        "np_f": np.asfortranarray(a),
        "np_view": np.arange(48, dtype="float64").reshape(4, 12)[:, ::2] * 0 + a,
        "np_f32": a.astype("float32"),
        "np_shape": a.reshape(6, 4),
        "np_object": np.array(["a", {"b"}, 3], dtype=object),
    }


def digests(objs):
    return {name: fncache.hash(obj) for name, obj in objs.items()}


def main(argv):
    if len(argv) >= 2 and argv[0] == "load":
        with open(argv[1], "rb") as f:
            objs = cloudpickle.load(f)
        print(json.dumps(digests(objs), sort_keys=True))
        return
    objs = dynamic_objects()
    if len(argv) >= 2 and argv[0] == "dump":
        with open(argv[1], "wb") as f:
            cloudpickle.dump(objs, f)
    out = digests(objs)
    out.update(digests(values()))
    out.update(digests(numpy_values()))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
