"""The mutation oracle: no single edit that changes a corpus program's output may keep its key.

The default run judges a sample of 40 mutants (``FNCACHE_MUTATION_SAMPLE``), chosen with a fixed seed
that ``FNCACHE_MUTATION_SEED`` rotates; ``FNCACHE_MUTATION=full`` judges every mutant. Unsound
mutants in the functions listed in ``tests/mutation/known_holes.py`` are reported but do not fail.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.mutation import oracle
from tests.mutation.known_holes import KNOWN_HOLES
from tests.mutation.mutator import mutants_of_file

slow = pytest.mark.slow


@pytest.fixture(scope="module")
def report() -> oracle.Report:
    """One oracle run (sampled or full, from the environment) shared by the tests of this module."""
    result = oracle.run_oracle(**oracle.options_from_env())
    print(result.summary())
    return result


@slow
def test_corpus_has_at_least_15_programs_and_300_mutants(report: oracle.Report) -> None:
    """The corpus is as large as the oracle promises: 15 programs, 300 mutants of the code they run."""
    assert len(oracle.programs()) >= 15
    assert report.total_mutants >= 300, report.summary()


@slow
def test_every_original_runs_deterministically_with_one_key(report: oracle.Report) -> None:
    """Each original program runs, gives one output and one key under two hash seeds and directories."""
    assert not report.unexpected_broken(), report.explain_failures()


@slow
def test_no_mutant_that_changes_the_output_keeps_its_key(report: oracle.Report) -> None:
    """Every judged mutant whose output differs from the original's (or that raises) gets a new key."""
    assert not report.failures(), report.explain_failures()


@slow
def test_the_oracle_sees_output_changes(report: oracle.Report) -> None:
    """The judged mutants mostly run and many change the output, so a pass is not vacuous."""
    judged = len(report.verdicts) - report.counts["not-judged"]
    assert judged > 0
    assert report.counts["invalid"] <= judged // 2, report.summary()
    assert report.counts["caught"] + report.counts["unsound"] >= judged // 3, report.summary()


@slow
def test_known_holes_table_lists_only_open_holes(report: oracle.Report) -> None:
    """In the full run, every KNOWN_HOLES entry still matches an unsound mutant (fixed ones are removed)."""
    if report.mode != "full":
        pytest.skip("only the full run (FNCACHE_MUTATION=full) sees every mutant")
    assert not report.unused_holes(), "\n".join(map(str, report.unused_holes()))


def test_known_holes_name_real_corpus_functions() -> None:
    """Each KNOWN_HOLES entry names a corpus program, one of its files and a function defined there."""
    for hole in KNOWN_HOLES:
        files = oracle.program_files(hole.program)
        assert files, hole
        if hole.path == "*":
            continue
        assert hole.path in files, hole
        names = {"<module>"} | {n.name for n in ast.walk(ast.parse(files[hole.path]))
                                if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert hole.function == "*" or hole.function.split(".")[-1] in names, hole
        assert hole.where in files[hole.path], hole


_SAMPLE = '''\
"""Doc."""

LIMIT = 3


def f(xs, scale=2, flag=True):
    """Doc."""
    total = 0
    for x in xs:
        if x < LIMIT and flag:
            total += x * scale
    return sorted(xs, key=abs, reverse=not flag) + [total, g(1, 2)]


def unused(x):
    return x + 1
'''


def test_mutator_makes_one_compiling_change_per_mutant() -> None:
    """Each mutant compiles, differs from the original in one place, and only reached code is mutated."""
    mutants = mutants_of_file("p", "m.py", _SAMPLE, {"f"})
    kinds = {m.kind for m in mutants}
    assert {"constant", "default", "binop", "compare", "boolop", "unary", "swap_args", "swap_kwargs",
            "remove", "augassign"} <= kinds
    for m in mutants:
        compile(m.source, "m.py", "exec")
        old, new = m.original.splitlines(), m.source.splitlines()
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
        assert changed and changed[0] + 1 == m.line, m.ident
        assert m.function in ("f", "<module>"), m.ident
        assert '"""Doc."""' in m.source
    assert not [m for m in mutants if "return x + 1" not in m.source]  # `unused` never ran


# Edits made by hand, run v1 -> v2 -> v1 at one path against one disk store: (program, file, old,
# new, whether the output changes). The comment-only edit must hit the entry version 1 stored.
_EDITS = [
    ("config_module", "config.py", "THRESHOLD = 10", "THRESHOLD = 3", True),
    ("closures", "tools.py", "return fn(*args) * factor", "return fn(*args) * factor + 1", True),
    ("notebook_script", "main.py", "THRESHOLD = 0.5", "THRESHOLD = 0.4", True),
    ("pandas_pipeline", "cleaning.py", "(1 - discount)", "(1 - discount / 2)", True),
    ("recursion", "algo.py", "    if n < 2:\n", "    if n < 2:  # the base case\n", False),
]


@slow
@pytest.mark.parametrize("program, path, old, new, changes", _EDITS, ids=[e[0] for e in _EDITS])
def test_corpus_edit_round_trip(tmp_path: Path, program: str, path: str, old: str, new: str,
                                changes: bool) -> None:
    """A hand edit of a corpus program misses (or, comment-only, hits) and undoing it hits version 1."""
    directory = oracle.checkout(program, tmp_path / "checkout" / program)
    store = str(tmp_path / "store")
    original = (directory / path).read_text()
    assert old in original
    v1 = oracle.run_program(directory, 1, store=store)
    (directory / path).write_text(original.replace(old, new, 1))
    v2 = oracle.run_program(directory, 2, store=store)
    (directory / path).write_text(original)
    again = oracle.run_program(directory, 3, store=store)
    runs = json.dumps({"v1": v1.__dict__, "v2": v2.__dict__, "v1 again": again.__dict__}, indent=1)
    assert v1.key and v1.hits == 0, runs
    if changes:
        assert v2.output != v1.output and v2.key != v1.key and v2.hits == 0, runs
    else:
        assert v2.key == v1.key and v2.hits == 1 and v2.output == v1.output, runs
    assert again.key == v1.key and again.output == v1.output and again.hits == 1, runs


def test_a_stale_key_is_reported_with_its_diff_outputs_and_keys() -> None:
    """A new output under the old key fails, and the report shows the file, diff, outputs and keys."""
    text = "def f(x):\n    return x + 1\n"
    mutant = next(m for m in mutants_of_file("p", "m.py", text, {"f"}) if m.kind == "binop")
    original = oracle.Run("k" * 32, None, {"value": 2}, 0, None)
    stale = oracle.Run("k" * 32, None, {"value": 0}, 0, None)
    fresh = oracle.Run("n" * 32, None, {"value": 0}, 0, None)
    assert oracle._status(original, fresh) == "caught"
    assert oracle._status(original, original) == "same-output-same-key"
    verdict = oracle.Verdict(mutant, oracle._status(original, stale), original, stale)
    report = oracle.Report([verdict], 1, {"p": original}, {}, 0.0, "test")
    assert report.failures() == [verdict]
    text = report.explain_failures()
    for expected in ("unsound: p/m.py, in f", "-    return x + 1", "+    return (x - 1)",
                     '{"value": 2}', '{"value": 0}', "k" * 32):
        assert expected in text
