"""The mutation oracle: a mutant whose output differs from the original's must get a different key.

For each program of ``corpus/`` the oracle runs the original once under a tracer to learn which of the
program's functions run (``_child.py``), makes every single mutation of those functions and of the
files' constants (``mutator.py``), and runs each mutant in a fresh interpreter with its own
``PYTHONHASHSEED``, the mutated file written at the same path as the original's. The program prints
the key of its memoized entry point (made before the call) and the call's output (its value, or the
exception it raised); the store is ``memory://``, so every run computes.

Verdicts: ``caught`` (output and key changed), ``unsound`` (output changed, key did not: a stale hit),
``same-output-new-key`` and ``same-output-same-key`` (their ratio is the harness's *precision*: the
share of output-preserving edits that still change the key), ``crash`` (the key raised where the
original's did not), ``invalid`` (the mutant never reached its report: an import-time error or a
timeout) and ``flaky`` (a second run of the mutant disagrees with its first). Two workers run mutants
in parallel, each in its own copy ("slot") of the program, compared with the original run in that slot.

``python -m tests.mutation.oracle [--full] [--sample N] [--seed S]`` prints the report.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.mutation.known_holes import KNOWN_HOLES, KnownHole
from tests.mutation.mutator import Mutant, mutants_of_file

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
CHILD = HERE / "_child.py"
REPO = HERE.parents[1]
WORKERS = 2
TIMEOUT = 60.0           # a mutant that runs longer is "invalid" (a mutation can loop forever)
BASELINE_TIMEOUT = 300.0  # an original is never that slow; only a loaded machine makes it so


@dataclass(frozen=True)
class Run:
    """What one run of a program printed (or how it failed before printing)."""

    key: str | None
    key_error: str | None
    output: Any
    hits: int
    failure: str | None  # the run ended without a report: the reason and the end of its stderr

    @property
    def shown(self) -> str:
        if self.failure is not None:
            return f"no report: {self.failure}"
        return json.dumps(self.output)


@dataclass(frozen=True)
class Verdict:
    """The oracle's judgement of one mutant."""

    mutant: Mutant
    status: str
    original: Run
    mutated: Run
    hole: KnownHole | None = None

    def diff(self) -> str:
        m = self.mutant
        return "".join(difflib.unified_diff(
            m.original.splitlines(keepends=True), m.source.splitlines(keepends=True),
            f"a/{m.program}/{m.path}", f"b/{m.program}/{m.path}", n=2))

    def details(self, width: int = 700) -> str:
        m = self.mutant

        def cut(s: str) -> str:
            return s if len(s) <= width else s[:width] + "..."

        return (f"--- {self.status}: {m.program}/{m.path}, in {m.function} (line {m.line}): "
                f"{m.kind}, {m.description}"
                + (f"  [known hole: {self.hole.cause}]" if self.hole else "") + "\n"
                + self.diff()
                + f"original key {self.original.key}  output {cut(self.original.shown)}\n"
                + f"mutant   key {self.mutated.key or self.mutated.key_error}  "
                  f"output {cut(self.mutated.shown)}\n")


def child_env(seed: int, store: str = "memory://oracle", **extra: str) -> dict[str, str]:
    """A child's environment: this checkout importable, no bytecode files, its own hash seed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = str(seed)
    # No .pyc files: a mutant written within the same second with the same size as the original
    # would otherwise run from the original's cached bytecode.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("FNCACHE_DIR", "FNCACHE_DISABLE", "FNCACHE_VERBOSE", "FNCACHE_SECRET"):
        env.pop(name, None)
    env["FNCACHE_STORE"] = store
    env.update(extra)
    return env


def run_program(directory: Path, seed: int, store: str = "memory://oracle",
                timeout: float = TIMEOUT) -> Run:
    """Run ``main.py`` of a checked-out program in a fresh interpreter and parse its report."""
    try:
        proc = subprocess.run([sys.executable, "main.py"], cwd=directory, env=child_env(seed, store),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Run(None, None, None, 0, f"timeout after {timeout:.0f} s")
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    if proc.returncode != 0 or not last:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        return Run(None, None, None, 0, f"exit {proc.returncode}: {tail}")
    data = json.loads(last[0])
    return Run(data.get("key"), data.get("key_error"), data["output"], data["hits"], None)


def programs() -> list[str]:
    """The names of the corpus programs."""
    return sorted(p.name for p in CORPUS.iterdir() if (p / "main.py").is_file())


def program_files(program: str) -> dict[str, str]:
    """``{relative posix path: text}`` of a program's Python files."""
    root = CORPUS / program
    return {p.relative_to(root).as_posix(): p.read_text()
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def checkout(program: str, dest: Path) -> Path:
    """Write the original program (and the reporting module) to ``dest``; gives ``dest``."""
    for rel, text in program_files(program).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    shutil.copyfile(CHILD, dest / "_oracle.py")
    return dest


def reached_functions(program: str, scratch: Path) -> dict[str, set[str]]:
    """``{file: qualified names}`` of the program's functions that run when it runs once."""
    directory = checkout(program, scratch / program)
    out = scratch / f"{program}.reached.json"
    proc = subprocess.run([sys.executable, "_oracle.py", "--trace", str(out), "main.py"], cwd=directory,
                          env=child_env(0), capture_output=True, text=True, timeout=BASELINE_TIMEOUT)
    if proc.returncode != 0:
        raise AssertionError(f"corpus program {program} failed under the tracer:\n{proc.stderr}")
    return {k: set(v) for k, v in json.loads(out.read_text()).items()}


def all_mutants(scratch: Path) -> list[Mutant]:
    """Every mutant of every corpus program, in a stable order."""
    mutants: list[Mutant] = []
    names = programs()
    with ThreadPoolExecutor(WORKERS) as pool:
        reached = list(pool.map(lambda p: reached_functions(p, scratch), names))
    for program, functions in zip(names, reached, strict=True):
        for rel, text in program_files(program).items():
            mutants.extend(mutants_of_file(program, rel, text, functions.get(rel, set())))
    return sorted(mutants, key=lambda m: m.ident)


def _seed(*parts: object) -> int:
    return int(hashlib.sha1(repr(parts).encode()).hexdigest()[:8], 16) % 4_000_000_000 + 1


def known_hole(mutant: Mutant | None, program: str = "") -> KnownHole | None:
    """The entry of ``KNOWN_HOLES`` that covers ``mutant`` (or, with ``None``, all of ``program``)."""
    for hole in KNOWN_HOLES:
        if mutant is None:
            if hole.program == program and hole.path == hole.function == "*":
                return hole
            continue
        line = mutant.original.splitlines()[mutant.line - 1]
        if hole.program == mutant.program and hole.path in ("*", mutant.path) \
                and hole.function in ("*", mutant.function) and hole.where in line:
            return hole
    return None


@dataclass
class Report:
    """Verdicts of one oracle run, and what it takes to print them."""

    verdicts: list[Verdict]
    total_mutants: int
    baselines: dict[str, Run]
    broken: dict[str, str]          # program -> why its original cannot be judged
    seconds: float
    mode: str
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.counts = Counter(v.status for v in self.verdicts)

    @property
    def precision(self) -> float:
        new, same = self.counts["same-output-new-key"], self.counts["same-output-same-key"]
        return new / (new + same) if new + same else float("nan")

    def failures(self) -> list[Verdict]:
        """Unsound mutants and crashes not covered by ``KNOWN_HOLES``."""
        return [v for v in self.verdicts if v.status in ("unsound", "crash") and v.hole is None]

    def unexpected_broken(self) -> dict[str, str]:
        return {p: why for p, why in self.broken.items() if known_hole(None, p) is None}

    def summary(self) -> str:
        c = self.counts
        judged = sum(c.values())
        lines = [
            f"mutation oracle ({self.mode}): {judged} of {self.total_mutants} mutants in "
            f"{len(self.baselines)} programs, {self.seconds:.0f} s",
            f"  caught (output and key changed):        {c['caught']}",
            f"  UNSOUND (output changed, same key):     {c['unsound']}"
            f"  ({sum(1 for v in self.verdicts if v.status == 'unsound' and v.hole)} in KNOWN_HOLES)",
            f"  crash (the key raised):                 {c['crash']}",
            f"  same output, new key:                   {c['same-output-new-key']}",
            f"  same output, same key:                  {c['same-output-same-key']}",
            f"  precision (new key among same output):  {self.precision:.2f}",
            f"  invalid (no report: import error, timeout): {c['invalid']}",
            f"  flaky (two runs of the mutant disagree):    {c['flaky']}",
            f"  not judged (original cannot be keyed):      {c['not-judged']}",
        ]
        for program, why in sorted(self.broken.items()):
            hole = known_hole(None, program)
            lines.append(f"  program {program}: {why}" + (f"  [known hole: {hole.cause}]" if hole else ""))
        causes: dict[str, list[Verdict]] = defaultdict(list)
        for v in self.verdicts:
            if v.status in ("unsound", "crash"):
                causes[v.hole.cause if v.hole else "NOT IN KNOWN_HOLES"].append(v)
        for cause, vs in sorted(causes.items()):
            where = sorted({f"{v.mutant.program}:{v.mutant.function}" for v in vs})
            lines.append(f"  cause {cause!r}: {len(vs)} mutants in {', '.join(where)}")
        return "\n".join(lines)

    def explain_failures(self, limit: int = 25) -> str:
        """The summary, then every failing mutant (diff, outputs, keys), then unused KNOWN_HOLES."""
        parts = [self.summary()]
        for program, why in sorted(self.unexpected_broken().items()):
            parts.append(f"--- program {program} cannot be judged: {why}")
        failures = self.failures()
        parts += [v.details() for v in failures[:limit]]
        if len(failures) > limit:
            parts.append(f"... and {len(failures) - limit} more")
        return "\n".join(parts)

    def unused_holes(self) -> list[KnownHole]:
        """KNOWN_HOLES entries no unsound mutant (nor broken program) of this run matched."""
        used = {v.hole for v in self.verdicts if v.hole is not None and v.status in ("unsound", "crash")}
        used |= {known_hole(None, p) for p in self.broken}
        return [h for h in KNOWN_HOLES if h not in used]


class _Slots:
    """Per-worker copies of the programs (those of ``check_baselines``), each with its original's run."""

    def __init__(self, root: Path, runs: dict[tuple[str, int], Run]) -> None:
        self.root = root
        self.runs = runs
        self.free: queue.Queue[int] = queue.Queue()
        for i in range(WORKERS):
            self.free.put(i)

    def directory(self, slot: int, program: str) -> Path:
        return self.root / f"baseline{slot}" / program

    def baseline(self, slot: int, program: str) -> Run:
        return self.runs[program, slot]


def judge(mutant: Mutant, slots: _Slots) -> Verdict:
    """Run one mutant in a free slot, the mutated file at the original's path, and judge it."""
    slot = slots.free.get()
    try:
        original = slots.baseline(slot, mutant.program)
        if original.failure is not None or original.key is None:
            return Verdict(mutant, "not-judged", original, original)
        target = slots.directory(slot, mutant.program) / mutant.path
        target.write_text(mutant.source)
        try:
            mutated = run_program(slots.directory(slot, mutant.program), _seed(mutant.ident, 1))
            status = _status(original, mutated)
            if status == "unsound":
                again = run_program(slots.directory(slot, mutant.program), _seed(mutant.ident, 2))
                if (again.output, again.key) != (mutated.output, mutated.key):
                    status = "flaky"
        finally:
            target.write_text(mutant.original)
    finally:
        slots.free.put(slot)
    hole = known_hole(mutant) if status in ("unsound", "crash") else None
    return Verdict(mutant, status, original, mutated, hole)


def _status(original: Run, mutated: Run) -> str:
    if mutated.failure is not None:
        return "invalid"
    if mutated.key is None:
        return "crash"
    same_output = mutated.output == original.output
    same_key = mutated.key == original.key
    if same_output:
        return "same-output-same-key" if same_key else "same-output-new-key"
    return "unsound" if same_key else "caught"


def check_baselines(root: Path, names: Iterable[str]) -> tuple[dict[tuple[str, int], Run], dict[str, str]]:
    """Run each original twice (two hash seeds, two directories): one output, one key, no error.

    Returns the runs by (program, copy) and, per program that cannot be judged, the reason
    (nondeterministic output, a key that depends on the hash seed or the directory, or a key that
    raised).
    """
    names = list(names)
    jobs = [(p, i) for p in names for i in (0, 1)]

    def go(job: tuple[str, int]) -> Run:
        p, i = job
        return run_program(checkout(p, root / f"baseline{i}" / p), _seed("baseline", p, i),
                           timeout=BASELINE_TIMEOUT)

    with ThreadPoolExecutor(WORKERS) as pool:
        runs = dict(zip(jobs, pool.map(go, jobs), strict=True))
    broken: dict[str, str] = {}
    for p in names:
        a, b = runs[p, 0], runs[p, 1]
        if a.failure is not None:
            broken[p] = f"the original did not run: {a.failure}"
        elif a.key is None:
            broken[p] = f"the original's key raised: {a.key_error}"
        elif a.output != b.output:
            broken[p] = f"nondeterministic output: {a.shown[:300]} vs {b.shown[:300]}"
        elif a.key != b.key:
            broken[p] = f"the key depends on the hash seed or the directory: {a.key} vs {b.key}"
    return runs, broken


def run_oracle(*, full: bool, sample: int = 40, seed: int = 0, root: Path | None = None) -> Report:
    """Enumerate the mutants, judge all of them (``full``) or a seeded sample, and report."""
    started = time.monotonic()
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="fncache-mutation-")) if root is None else root
    try:
        mutants = all_mutants(root / "trace")
        runs, broken = check_baselines(root, programs())
        judgeable = [m for m in mutants if m.program not in broken]
        chosen = judgeable if full else sorted(
            random.Random(seed).sample(judgeable, min(sample, len(judgeable))), key=lambda m: m.ident)
        slots = _Slots(root, runs)
        with ThreadPoolExecutor(WORKERS) as pool:
            verdicts = list(pool.map(lambda m: judge(m, slots), chosen))
        mode = "full" if full else f"sample of {len(chosen)}, seed {seed}"
        baselines = {p: r for (p, i), r in runs.items() if i == 0}
        return Report(verdicts, len(mutants), baselines, broken, time.monotonic() - started, mode)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def options_from_env() -> dict[str, Any]:
    """``full``, ``sample`` and ``seed`` from FNCACHE_MUTATION, _SAMPLE and _SEED."""
    return {
        "full": os.environ.get("FNCACHE_MUTATION", "") == "full",
        "sample": int(os.environ.get("FNCACHE_MUTATION_SAMPLE", "40")),
        "seed": int(os.environ.get("FNCACHE_MUTATION_SEED", "0")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    defaults = options_from_env()
    parser.add_argument("--full", action="store_true", default=defaults["full"])
    parser.add_argument("--sample", type=int, default=defaults["sample"])
    parser.add_argument("--seed", type=int, default=defaults["seed"])
    parser.add_argument("--json", type=Path, help="also write every verdict to this file")
    parser.add_argument("--all-details", action="store_true",
                        help="print every unsound mutant and crash, known holes included")
    args = parser.parse_args(argv)
    report = run_oracle(full=args.full, sample=args.sample, seed=args.seed)
    print(report.explain_failures())
    if args.all_details:
        for v in report.verdicts:
            if v.status in ("unsound", "crash") and v.hole is not None:
                print(v.details())
    unused = report.unused_holes()
    if unused and args.full:
        print("KNOWN_HOLES entries that matched nothing (remove them):")
        for h in unused:
            print(f"  {h}")
    if args.json:
        args.json.write_text(json.dumps([
            {"ident": v.mutant.ident, "program": v.mutant.program, "path": v.mutant.path,
             "function": v.mutant.function, "kind": v.mutant.kind, "description": v.mutant.description,
             "status": v.status, "hole": v.hole.cause if v.hole else None, "diff": v.diff(),
             "original": {"key": v.original.key, "output": v.original.output},
             "mutated": {"key": v.mutated.key, "key_error": v.mutated.key_error,
                         "output": v.mutated.output, "failure": v.mutated.failure}}
            for v in report.verdicts], indent=1))
    return 1 if report.failures() or report.unexpected_broken() else 0


if __name__ == "__main__":
    sys.exit(main())
