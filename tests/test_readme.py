"""The README's code, the documentation's and the examples run as documented.

README and docs blocks: every block fenced as ```` ```python ```` runs, each in a fresh interpreter whose
working directory is empty and whose ``FNCACHE_DIR`` is a temporary store shared by the blocks of
one test run (one per page of ``docs/``), in the order they appear; a block must exit 0. A block
is not run when it contains ``...`` (code left out for the reader to fill in) or when the line
before its fence is ``<!-- not run -->``. The docs also build strictly (``mkdocs build --strict``),
and the README stays a landing page that points to every page.

Examples: each ``examples/*.py`` runs twice as a script on a fresh store. Examples report their
cached steps with one line each, starting ``hit NAME``, ``miss NAME`` or ``skip NAME`` (not called);
the first run must compute (a ``miss`` line) and the second must not (``hit`` lines, no ``miss``).
``examples/demo.py`` prints its own story and is checked on its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, run_py

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
EXAMPLES = sorted(p for p in (REPO / "examples").glob("*.py") if p.name != "demo.py")
NOT_RUN = "<!-- not run -->"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def readme_blocks(readme: Path = README) -> list[tuple[int, str]]:
    """(line number, source) of each README block that is meant to run."""
    text = readme.read_text()
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        code = m.group(1)
        if "..." in code or before.strip() == NOT_RUN:
            continue
        out.append((text.count("\n", 0, m.start()) + 1, code))
    return out


def test_readme_block_selection_follows_the_rule(tmp_path: Path) -> None:
    """Blocks with ``...`` or a ``not run`` marker are left out; other python blocks are kept."""
    fake = tmp_path / "README.md"
    fake.write_text(
        "# t\n\n```python\nprint(1)\n```\n\n```python\nf(...)\n```\n\n"
        f"{NOT_RUN}\n```python\nraise SystemExit(1)\n```\n\n```bash\nexit 1\n```\n"
        "\n```python\nprint(2)\n```\n"
    )
    assert readme_blocks(fake) == [(3, "print(1)\n"), (20, "print(2)\n")]


def run_blocks(page: Path, tmp_path: Path) -> None:
    """Run the page's blocks in order, each in a fresh interpreter and an empty folder, on one store."""
    blocks = readme_blocks(page)
    if not blocks:
        pytest.skip(f"{page.name} has no python block meant to run (see this module's docstring)")
    env = {"FNCACHE_DIR": str(tmp_path / "store")}
    for i, (line, code) in enumerate(blocks):
        script = tmp_path / f"block_{i}_line_{line}.py"
        script.write_text(code)
        workdir = tmp_path / f"cwd_{i}"
        workdir.mkdir()
        try:
            run_py(script, cwd=workdir, env=env, timeout=60)
        except AssertionError as e:
            raise AssertionError(f"{page.name}, the block at line {line}: {e}") from None


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path: Path) -> None:
    """Every runnable python block of the README exits 0, in order, on one temporary store."""
    run_blocks(README, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in DOCS if readme_blocks(p)], ids=lambda p: p.name)
def test_docs_python_blocks_run(page: Path, tmp_path: Path) -> None:
    """Every runnable python block of each documentation page exits 0, in order, on one store."""
    run_blocks(page, tmp_path)


def test_docs_blocks_left_out_are_few_and_marked() -> None:
    """Blocks of the docs that do not run are the exception: each says so (``...`` or the marker),
    and most blocks run."""
    total = sum(len(_FENCE.findall(p.read_text())) for p in DOCS)
    running = sum(len(readme_blocks(p)) for p in DOCS)
    assert total and running >= total / 2, (running, total)


@pytest.mark.slow
def test_docs_build_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict`` passes: every page of the nav exists, every link and anchor
    resolves, the API reference is generated from the docstrings and the changelog includes
    CHANGES.md."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    api = (site / "api" / "index.html").read_text()
    assert "Cache a function" in api and ":class:" not in api  # memoize's docstring, roles rendered
    assert "every cached entry of 0.1 misses once" in (site / "changelog" / "index.html").read_text()


def test_readme_is_a_landing_page() -> None:
    """The README stays a landing page: at most 400 lines, starting with the two set-up commands,
    and it says where each topic of the docs lives."""
    text = README.read_text()
    assert len(text.splitlines()) <= 400
    first = _FENCE_ANY.search(text)
    assert first is not None and first.group(2).splitlines()[:2] == [
        'python -m pip install ".[examples]" && python examples/demo.py',
        'python -m pip install -e ".[test]" && python -m pytest',
    ]
    for page in DOCS:
        if page.name != "index.md":
            assert f"docs/{page.name}" in text, f"the README does not point to docs/{page.name}"


_FENCE_ANY = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def statuses(stdout: str) -> dict[str, list[str]]:
    """The example's ``hit``/``miss``/``skip`` lines, grouped by status."""
    out: dict[str, list[str]] = {"hit": [], "miss": [], "skip": []}
    for line in stdout.splitlines():
        m = re.match(r"(hit|miss|skip) (\S+)", line)
        if m:
            out[m.group(1)].append(m.group(2))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_and_hits_on_the_second_run(example: Path, tmp_path: Path) -> None:
    """An example computes on a fresh store and, run again, reads every step back."""
    env = {"FNCACHE_DIR": str(tmp_path / "store")}
    first = statuses(run_py(example, cwd=tmp_path, env=env, timeout=60).stdout)
    assert first["miss"], f"{example.name} printed no 'miss NAME' line on a fresh store"
    second = statuses(run_py(example, cwd=tmp_path, env=env, timeout=60).stdout)
    assert second["hit"] and not second["miss"], second


@pytest.mark.slow
def test_pipeline_parameter_change_recomputes_only_the_steps_it_reaches(tmp_path: Path) -> None:
    """``--alpha`` changes the fit: the steps using it compute, the features come from the cache."""
    env = {"FNCACHE_DIR": str(tmp_path / "store")}
    script = REPO / "examples" / "pipeline.py"
    run_py(script, cwd=tmp_path, env=env, timeout=60)
    changed = statuses(run_py(script, "--alpha", "0.1", cwd=tmp_path, env=env, timeout=60).stdout)
    assert sorted(changed["miss"]) == ["evaluate", "fit"]
    assert changed["hit"] == ["features"]
    assert changed["skip"] == ["load"]


@pytest.mark.slow
def test_pipeline_flags_change_its_score(tmp_path: Path) -> None:
    """Each of pipeline.py's flags changes the score it prints (a flag that changed nothing
    visible taught nothing), and every run says what to try next."""
    env = {"FNCACHE_DIR": str(tmp_path / "store")}
    script = REPO / "examples" / "pipeline.py"
    scores = {}
    for flags in ([], ["--alpha", "0.1"], ["--window", "10"], ["--seed", "1"]):
        out = run_py(script, *flags, cwd=tmp_path, env=env, timeout=60).stdout
        scores[" ".join(flags)] = re.search(r"^rmse (\S+)", out, re.M).group(1)  # type: ignore[union-attr]
        assert "Try next:" in out
    assert len(set(scores.values())) == len(scores), scores


@pytest.mark.slow
def test_demo_tells_its_story(tmp_path: Path) -> None:
    """The demo misses, hits in a new process, hits after a comment edit, misses after a helper
    edit, and hits again after the revert."""
    proc = run_py(REPO / "examples" / "demo.py", cwd=tmp_path,
                  env={"FNCACHE_DIR": str(tmp_path / "store")}, timeout=120)
    steps = [line for line in proc.stdout.splitlines() if re.match(r"\d\. ", line)]
    outcomes = [re.search(r":\s+(hit|miss)\b", line).group(1) for line in steps]  # type: ignore[union-attr]
    assert outcomes == ["miss", "hit", "hit", "miss", "hit"], proc.stdout
    assert not (tmp_path / "store").exists()  # the user's own cache is never read, written or cleared
    # It names no path it has removed, and says what to try next.
    assert "removed with its temporary folder" in proc.stdout
    assert not re.search(r"/tmp\w*/|store:", proc.stdout), proc.stdout
    assert "Try next:" in proc.stdout and "python examples/pipeline.py" in proc.stdout


@pytest.mark.slow
def test_examples_say_what_they_need(tmp_path: Path) -> None:
    """Without numpy, the demo still tells its story and the other examples exit naming what to install."""
    blocked = tmp_path / "blocked" / "numpy"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('numpy is not installed here')\n")
    env = dict(os.environ, FNCACHE_DIR=str(tmp_path / "store"),
               PYTHONPATH=os.pathsep.join([str(blocked.parent), str(REPO)]))
    for example in EXAMPLES:
        proc = subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        needs_numpy = "import numpy" in example.read_text()
        assert (proc.returncode != 0) == needs_numpy, (example.name, proc.stderr)
        if needs_numpy:
            assert "needs numpy: python -m pip install numpy" in proc.stderr, proc.stderr
            assert "Traceback" not in proc.stderr
    demo = subprocess.run([sys.executable, str(REPO / "examples" / "demo.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
