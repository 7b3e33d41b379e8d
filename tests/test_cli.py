"""The fncache command, run as a real subprocess against a real store."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from .helpers import doctor_failed, run_py, write

FILL = """
import sys
import fncache

@fncache.memoize(store=sys.argv[1])
def small(x):
    return x

@fncache.memoize(store=sys.argv[1])
def large(x):
    return bytes(200_000) + bytes([x])

if __name__ == "__main__":
    for i in range(int(sys.argv[2])):
        (small if sys.argv[3] == "small" else large)(i)
"""


def fncache_cmd(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fncache", *args],
        capture_output=True,
        text=True,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture
def filled(tmp_path):
    """A store with 3 entries of `small` and 2 of `large`, written by another process."""
    script = write(tmp_path / "fill.py", FILL)
    cache = str(tmp_path / "cache")
    run_py(script, cache, "3", "small")
    run_py(script, cache, "2", "large")
    return tmp_path, script, cache


def info(cache: str) -> dict:
    proc = fncache_cmd("info", "--dir", cache, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_info_reports_entries_and_bytes(filled):
    """info shows the store, its entry count, size and number of functions."""
    _, _, cache = filled
    data = info(cache)
    assert data["entries"] == 5
    assert data["functions"] == 2
    assert data["bytes"] > 400_000
    text = fncache_cmd("info", "--dir", cache).stdout
    assert "entries:   5" in text and cache in text


@pytest.mark.slow
def test_ls_groups_by_function(filled):
    """ls lists each function with its entry count, largest first."""
    _, _, cache = filled
    rows = json.loads(fncache_cmd("ls", "--dir", cache, "--json").stdout)
    assert [(r["function"], r["entries"]) for r in rows] == [("fill:large", 2), ("fill:small", 3)]
    assert "fill:small" in fncache_cmd("ls", "--dir", cache).stdout


@pytest.mark.slow
def test_clear_by_function_leaves_others(filled):
    """clear --function removes only that function's entries."""
    _, _, cache = filled
    before = info(cache)["bytes"]
    proc = fncache_cmd("clear", "--dir", cache, "--function", "small", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["removed"] == 3
    assert report["bytes"] == before - info(cache)["bytes"] > 0  # bytes freed are reported
    assert info(cache)["entries"] == 2


@pytest.mark.slow
def test_clear_dry_run_removes_nothing(filled):
    """--dry-run says what would go and deletes nothing."""
    _, _, cache = filled
    proc = fncache_cmd("clear", "--dir", cache, "--dry-run")
    assert "would remove 5 entries" in proc.stdout
    assert info(cache)["entries"] == 5
    lines = proc.stdout.splitlines()
    assert any("fill:small" in line and "3 entries" in line for line in lines), proc.stdout
    assert any("fill:large" in line and "2 entries" in line and "KiB" in line for line in lines)
    plan = json.loads(fncache_cmd("clear", "--dir", cache, "--dry-run", "--json").stdout)
    assert plan["bytes"] == info(cache)["bytes"]
    assert {(g["function"], g["entries"]) for g in plan["functions"]} == {("fill:small", 3),
                                                                         ("fill:large", 2)}


@pytest.mark.slow
def test_clear_by_age_and_size(filled):
    """--older-than removes only entries written before the cutoff; --larger-than only big ones."""
    from fncache.stores.disk import DiskStore

    tmp_path, script, cache = filled
    store = DiskStore(cache)
    for e in list(store.entries()):  # the fixture's entries, made an hour old (no sleeping)
        value = store.get(e.key)
        store.delete(e.key)
        store.add(e.key, value, dict(e.meta, created=time.time() - 3600))
    store.close()
    run_py(script, cache, "6", "small")  # 3 new small entries (3..5); 0..2 already there
    proc = fncache_cmd("clear", "--dir", cache, "--older-than", "30m", "--function", "small", "--yes")
    assert "removed 3 entries" in proc.stdout, proc.stdout + proc.stderr
    proc = fncache_cmd("clear", "--dir", cache, "--larger-than", "100KB", "--yes")
    assert "removed 2 entries" in proc.stdout
    assert info(cache)["entries"] == 3


@pytest.mark.slow
def test_clear_everything(filled):
    """clear with no filter removes every entry."""
    _, _, cache = filled
    proc = fncache_cmd("clear", "--dir", cache, "--yes")
    assert proc.returncode == 0
    assert info(cache)["entries"] == 0


@pytest.mark.slow
def test_entries_cleared_from_cli_are_recomputed(filled):
    """After clear, the function computes again and the store fills again."""
    tmp_path, script, cache = filled
    fncache_cmd("clear", "--dir", cache, "--yes")
    run_py(script, cache, "3", "small")
    assert info(cache)["entries"] == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, needle",
    [
        (["clear", "--older-than", "7x"], "--older-than"),
        (["clear", "--larger-than", "big"], "--larger-than"),
        (["ls", "--sort", "colour"], "--sort"),
        (["ls", "--function", "a", "--function", "b"], "--function: given twice"),
        (["clear", "--function", "a", "--function", "b", "--dry-run"], "--function: given twice"),
        (["doctor", "job.py:f", "--seeds", "1,x"], "--seeds"),
        (["doctor", "job.py:f", "--seeds", "1,99999999999"], "--seeds"),
        (["doctor", "job.py:f", "--seeds", ","], "--seeds"),
        (["doctor", "job.py:f", "--seeds", "1,\u0661"], "--seeds"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_naming_the_option(args, needle, tmp_path):
    """Bad options give a clear message naming the option and exit status 2; nothing is deleted."""
    proc = fncache_cmd(*args, "--dir", str(tmp_path)) if args else fncache_cmd()
    assert proc.returncode == 2
    assert needle in proc.stderr


@pytest.mark.slow
def test_missing_store_exits_1(tmp_path):
    """A cache directory that does not exist is reported, with exit status 1, and not created."""
    missing = tmp_path / "nope"
    proc = fncache_cmd("info", "--dir", str(missing))
    assert proc.returncode == 1
    assert "no cache" in proc.stderr
    assert not missing.exists()
    a_file = tmp_path / "job.py"
    a_file.write_text("x = 1\n")
    proc = fncache_cmd("ls", "--dir", str(a_file))
    assert proc.returncode == 1 and "a file, not a directory" in proc.stderr


@pytest.mark.slow
def test_console_script_is_installed():
    """The fncache console script runs (the package is installed, not only importable)."""
    import os
    import shutil
    import sysconfig

    scripts = os.pathsep.join({sysconfig.get_path("scripts"), os.path.dirname(sys.executable)})
    exe = shutil.which("fncache") or shutil.which("fncache", path=scripts)
    if exe is None:
        pytest.skip("console script not on PATH")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "fncache" in proc.stdout


DOCTOR_JOB = """
import fncache

TABLE = {"a", "b", "c"}
SALT = hash("salt")  # differs with PYTHONHASHSEED: a global like this makes keys unstable

def helper(x):
    return x in TABLE

@fncache.memoize
def stable(x):
    return helper(x)

@fncache.memoize
def unstable(x):
    return (x, SALT)
"""


@pytest.mark.slow
def test_doctor_passes_a_stable_function(tmp_path):
    """doctor checks environment, store and key stability, and exits 0 when all pass."""
    job = write(tmp_path / "job.py", DOCTOR_JOB)
    proc = fncache_cmd("doctor", "--dir", str(tmp_path / "c"), f"{job}:stable", "--json")
    assert proc.returncode in (0, 1) and not doctor_failed(proc), proc.stdout + proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["key stability"]["ok"]
    assert checks["store writable"]["ok"]
    assert checks["permissions"]["ok"]


@pytest.mark.slow
def test_doctor_names_the_component_that_makes_keys_unstable(tmp_path):
    """A global that depends on the hash seed is reported by name, with exit status 1."""
    job = write(tmp_path / "job.py", DOCTOR_JOB)
    proc = fncache_cmd("doctor", "--dir", str(tmp_path / "c"), f"{job}:unstable")
    assert proc.returncode == 1
    assert "global SALT" in proc.stdout


@pytest.mark.slow
def test_doctor_names_a_function_it_cannot_find(tmp_path):
    """A typo in doctor's target fails the stability check with what is missing, not a traceback line."""
    job = write(tmp_path / "job.py", DOCTOR_JOB)
    proc = fncache_cmd("doctor", "--dir", str(tmp_path / "c"), f"{job}:stabel", "--seeds", "1")
    assert proc.returncode == 1
    assert f"cannot load {job}:stabel: {job} has no 'stabel'; did you mean 'stable'?" in proc.stdout


@pytest.mark.slow
def test_doctor_flags_a_cache_directory_others_can_write(tmp_path):
    """A group- or world-writable cache directory fails the permissions check."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    proc = fncache_cmd("doctor", "--dir", str(cache))
    assert proc.returncode == 1
    assert "chmod 700" in proc.stdout


@pytest.mark.slow
def test_prune_to_a_size_removes_oldest_first(filled):
    """prune --max-size removes entries until the store fits, oldest (least recently used) first."""
    tmp_path, script, cache = filled
    dry = fncache_cmd("prune", "--dir", cache, "--max-size", "250KB", "--dry-run")
    assert "would remove" in dry.stdout and info(cache)["entries"] == 5
    proc = fncache_cmd("prune", "--dir", cache, "--max-size", "250KB", "--yes")
    assert proc.returncode == 0, proc.stderr
    data = info(cache)
    assert data["bytes"] <= 250 * 1024
    # Oldest first: the three small entries (written first) and the first large one go.
    rows = {r["function"]: r["entries"]
            for r in json.loads(fncache_cmd("ls", "--dir", cache, "--json").stdout)}
    assert rows == {"fill:large": 1}, rows


def _on_a_terminal(*args: str) -> bytes:
    """What ``fncache ARGS`` writes to stderr when stderr is a terminal."""
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "fncache", *args],
        stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, text=True, timeout=120,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert proc.returncode == 0
    return shown


@pytest.mark.slow
def test_progress_shows_on_a_terminal_and_not_when_piped(filled):
    """Scanning a store (prune) and removing entries in batches (clear) show a counter when stderr
    is a terminal and nothing when it is piped; a whole-store dry run, and a prune of a store
    within its limit, read no entry."""
    _, _, cache = filled
    piped = fncache_cmd("prune", "--dir", cache, "--max-size", "1B", "--dry-run")
    assert piped.stderr == ""
    assert b"scanning: 5 done" in _on_a_terminal("prune", "--dir", cache, "--max-size", "1B",
                                                  "--dry-run")
    assert b"scanning" not in _on_a_terminal("prune", "--dir", cache, "--max-size", "1MB",
                                             "--dry-run")
    assert b"scanning" not in _on_a_terminal("clear", "--dir", cache, "--dry-run")
    assert b"removed: 5 done" in _on_a_terminal("clear", "--dir", cache, "--yes")
    assert info(cache)["entries"] == 0


# -- read-only commands create nothing -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("args", [["info"], ["ls"], ["explain", "job.py:f"],
                                  ["clear", "--yes"], ["prune", "--max-size", "1MB", "--yes"]],
                         ids=["info", "ls", "explain", "clear", "prune"])
def test_commands_on_a_directory_without_a_store_create_nothing(tmp_path, args):
    """On an existing directory that holds no store, every command but doctor exits 1 and writes nothing."""
    empty = tmp_path / "empty"
    empty.mkdir()
    write(tmp_path / "job.py", "import fncache\n@fncache.memoize\ndef f(x):\n    return x\n")
    proc = subprocess.run([sys.executable, "-m", "fncache", *args, "--dir", str(empty)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no fncache store" in proc.stderr
    assert list(empty.iterdir()) == []


MEMORY_JOB = """
import sys
from fncache import Memory

memory = Memory(sys.argv[1], verbose=0)

@memory.cache
def double(x):
    return 2 * x

double(1), double(2)
"""


@pytest.mark.slow
def test_dir_of_a_memory_location_finds_its_store(tmp_path):
    """--dir pointed at a fncache.Memory location reads (and clears) the store Memory keeps in it."""
    location = tmp_path / "joblib_cache"
    run_py(write(tmp_path / "mem.py", MEMORY_JOB), str(location))
    assert info(str(location))["entries"] == 2
    rows = json.loads(fncache_cmd("ls", "--dir", str(location), "--json").stdout)
    assert [(r["function"], r["entries"]) for r in rows] == [("mem:double", 2)]
    assert fncache_cmd("clear", "--dir", str(location), "--yes").returncode == 0
    assert info(str(location))["entries"] == 0
    assert not (location / "cache.db").exists()  # nothing created beside Memory's own folder


# -- no silent deletes ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("args", [["clear"], ["clear", "--function", "small"],
                                  ["prune", "--max-size", "1B"]],
                         ids=["clear", "clear-function", "prune"])
def test_deleting_without_yes_and_without_a_terminal_deletes_nothing(filled, args):
    """clear and prune with stdin not a terminal and no --yes exit 2, say to use --yes, delete nothing."""
    _, _, cache = filled
    proc = fncache_cmd(*args, "--dir", cache)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--yes" in proc.stderr and f"usage: fncache {args[0]}" in proc.stderr
    assert info(cache)["entries"] == 5


@pytest.mark.slow
def test_clear_on_a_terminal_asks_and_a_no_keeps_everything(filled):
    """On a terminal, clear asks; an answer other than yes removes nothing (exit 1)."""
    import os
    import pty

    _, _, cache = filled
    master, slave = pty.openpty()
    os.write(master, b"n\n")
    proc = subprocess.run([sys.executable, "-m", "fncache", "clear", "--dir", cache],
                          stdin=slave, capture_output=True, text=True, timeout=120)
    os.close(slave)
    os.close(master)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing removed" in proc.stdout
    assert info(cache)["entries"] == 5


@pytest.mark.slow
@pytest.mark.parametrize("args", [["prune", "--max-size", "5"], ["clear", "--larger-than", "512"]])
def test_a_size_without_a_unit_is_refused_with_a_hint(filled, args):
    """A bare number as a size is bad usage (exit 2) with the units to write; nothing is deleted."""
    _, _, cache = filled
    proc = fncache_cmd(*args, "--dir", cache, "--yes")
    assert proc.returncode == 2
    n = args[-1]
    assert f"{n}MB" in proc.stderr and f"{n}B for bytes" in proc.stderr
    assert info(cache)["entries"] == 5


@pytest.mark.slow
def test_prune_dry_run_lists_functions_entries_and_bytes(filled):
    """prune --dry-run names each function that would lose entries, with counts and bytes."""
    _, _, cache = filled
    plan = json.loads(fncache_cmd("prune", "--dir", cache, "--max-size", "250KB", "--dry-run",
                                  "--json").stdout)
    assert {(g["function"], g["entries"]) for g in plan["functions"]} == {("fill:small", 3),
                                                                         ("fill:large", 1)}
    assert plan["bytes"] == sum(g["bytes"] for g in plan["functions"]) > 200_000
    text = fncache_cmd("prune", "--dir", cache, "--max-size", "250KB", "--dry-run").stdout
    assert "would remove 4 entries" in text and "fill:large" in text
    assert info(cache)["entries"] == 5


# -- polish --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("command", ["", "info", "ls", "clear", "prune", "explain", "doctor"])
def test_help_shows_no_markup(command):
    """--help of fncache and of each command is plain text: no reST backticks or roles."""
    proc = fncache_cmd(*filter(None, [command]), "--help")
    assert proc.returncode == 0 and "usage: fncache" in proc.stdout
    assert "``" not in proc.stdout and ":func:" not in proc.stdout and ":class:" not in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ls", "clear", "info"])
def test_an_unknown_option_shows_the_commands_usage(command, tmp_path):
    """An option a command does not know prints that command's usage and exits 2."""
    proc = fncache_cmd(command, "--bogus", "--dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"usage: fncache {command} ")
    assert "unrecognized arguments: --bogus" in proc.stderr


@pytest.mark.slow
def test_explain_and_doctor_help_say_the_code_runs():
    """explain and doctor say in --help that they run the target's code, without storing entries."""
    for command in ("explain", "doctor"):
        text = " ".join(fncache_cmd(command, "--help").stdout.split())
        assert "The target's code runs" in text and "nothing is stored" in text


@pytest.mark.slow
def test_info_counts_the_database_files(filled):
    """info's size includes the store's database (cache.db and its -wal/-shm files)."""
    from pathlib import Path

    _, _, cache = filled
    db = (Path(cache) / "cache.db").stat().st_size  # a reader only adds to it (-wal, -shm)
    data = info(cache)
    assert data["database_bytes"] >= db > 0
    assert data["total_bytes"] == data["bytes"] + data["database_bytes"]
    assert f"({data['total_bytes']} bytes" in fncache_cmd("info", "--dir", cache).stdout


def test_listing_escapes_control_characters_in_planted_names(tmp_path):
    """A function name planted in a store with terminal escape sequences is printed escaped by
    `ls`, so listing a shared store cannot clear or retitle the terminal."""
    from fncache.stores import open_store

    store = open_store(str(tmp_path / "s"))
    store.add("0" * 32, b"not a frame", {"function": "evil\x1b]0;pwned\x07:\x1b[2Jf"})
    out = fncache_cmd("ls", "--dir", str(tmp_path / "s")).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;pwned\\x07:\\x1b[2Jf" in out


# -- everyday frictions: the console script, units, exit codes, pipes, suggestions ---------------

STEP_JOB = """
import fncache

@fncache.memoize(store="cache")
def step(x):
    return x + 1

if __name__ == "__main__":
    step(1), step(2)
"""


def console_script() -> str:
    """The installed ``fncache`` console script (the tests' PYTHONPATH reaches it too)."""
    import os
    import shutil
    import sysconfig

    scripts = os.pathsep.join({sysconfig.get_path("scripts"), os.path.dirname(sys.executable)})
    exe = shutil.which("fncache", path=scripts) or shutil.which("fncache")
    if exe is None:
        pytest.skip("console script not installed")
    return exe


def console(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    """Run the ``fncache`` console script in ``cwd``, as a user does in the folder of their script."""
    return subprocess.run([console_script(), *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


@pytest.fixture
def step_job(tmp_path):
    """A folder holding job.py, run once from there: its store (./cache) holds 2 entries of job:step."""
    write(tmp_path / "job.py", STEP_JOB)
    run_py(tmp_path / "job.py", cwd=tmp_path)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("target", ["job:step", "step", "job.step", "job.py:step"])
def test_console_script_explains_from_the_scripts_folder(step_job, target):
    """From the folder holding job.py the console script explains job:step (the name ls shows),
    the bare qualname and the script path alike, as `python -m fncache` does there."""
    proc = console("explain", target, "--dir", "cache", cwd=step_job)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("job:step: 2 entries; the current code has entries"), proc.stdout
    assert "job:step" in console("ls", "--dir", "cache", cwd=step_job).stdout


@pytest.mark.slow
def test_explain_of_a_bare_name_without_entries_suggests_the_stored_one(step_job):
    """A bare name no stored function has fails (exit 1) naming the nearest stored function."""
    proc = console("explain", "stpe", "--dir", "cache", cwd=step_job)
    assert proc.returncode == 1
    assert "no entries of a function named 'stpe'" in proc.stderr
    assert "did you mean 'job:step'?" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [["clear", "--older-than", "5"], ["clear", "--unused-for", "2.5"],
                                  ["prune", "--older-than", "5"], ["prune", "--older-than", "0"]])
def test_an_age_without_a_unit_is_refused_with_the_units(step_job, args):
    """A bare number as an age is bad usage (exit 2) naming the option and the units; nothing is
    deleted (it used to be read as seconds, deleting almost everything)."""
    proc = console(*args, "--dir", "cache", "--yes", cwd=step_job)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    n = args[-1]
    assert f"argument {args[1]}: '{n}' has no unit: write {n}d, {n}h, {n}m or {n}s" in proc.stderr
    assert info(str(step_job / "cache"))["entries"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("age", ["5d", "12h", "30m", "45s", "2w"])
def test_an_age_with_a_unit_is_taken(step_job, age):
    """Ages with a unit are accepted; entries younger than the age are kept."""
    proc = console("clear", "--older-than", age, "--dir", "cache", "--yes", cwd=step_job)
    assert proc.returncode == 0, proc.stderr
    assert "removed 0 entries" in proc.stdout
    assert info(str(step_job / "cache"))["entries"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("target", ["job.py", "job.ipynb", "sub/job", "job.py:", ":step"])
def test_explain_of_a_file_without_a_function_is_bad_usage(step_job, target):
    """explain of a file without :FUNC (or an empty half of MODULE:FUNC) exits 2 with the usage."""
    proc = console("explain", target, "--dir", "cache", cwd=step_job)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("usage: fncache explain ")
    assert repr(target) in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", [["info"], ["ls"], ["ls", "--json"], ["clear", "--dry-run"]])
def test_a_closed_pipe_ends_quietly(step_job, command):
    """When the reader of the output has gone (`fncache info | head -1`), the command prints no
    error and exits 141, as a shell shows a process ended by SIGPIPE; the store is untouched."""
    import os

    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        proc = subprocess.run([console_script(), *command, "--dir", "cache"], cwd=step_job,
                              stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == 141
    assert info(str(step_job / "cache"))["entries"] == 2


@pytest.mark.slow
def test_head_of_the_output_prints_no_error(step_job):
    """`fncache info | head -1` in a shell prints the first line and no error."""
    import shlex

    proc = subprocess.run(f"{shlex.quote(console_script())} info --dir cache | head -1", shell=True,
                          cwd=step_job, capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("store:") and proc.stdout.count("\n") == 1
    assert proc.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("args, hint", [
    (["lss"], "did you mean 'ls'?"),
    (["expalin", "step"], "did you mean 'explain'?"),
    (["ls", "--functon", "step"], "did you mean '--function' (for '--functon')?"),
    (["clear", "--older-then", "5d", "--yes"], "did you mean '--older-than'"),
    (["ls", "--sort", "sizes"], "did you mean 'size'?"),
])
def test_a_mistyped_command_or_option_gets_the_nearest_one(step_job, args, hint):
    """A mistyped command, option or choice is bad usage (exit 2) naming the nearest valid one."""
    proc = console(*args, "--dir", "cache", cwd=step_job)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert hint in proc.stderr, proc.stderr
    assert info(str(step_job / "cache"))["entries"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("command", [["ls"], ["ls", "--json"], ["clear", "--yes"],
                                     ["clear", "--dry-run"]])
def test_a_function_name_with_no_entries_suggests_the_stored_one(step_job, command):
    """ls/clear --function with a name that has no entries says so on stderr with the nearest
    stored function name, and removes nothing."""
    proc = console(*command, "--function", "stpe", "--dir", "cache", cwd=step_job)
    assert proc.returncode == 0, proc.stderr
    assert "no entries of 'stpe'" in proc.stderr and "did you mean 'job:step'?" in proc.stderr
    assert info(str(step_job / "cache"))["entries"] == 2


def test_the_cli_page_documents_every_command_and_option():
    """docs/cli.md names every command and every option of each (the page is the reference)."""
    from pathlib import Path

    from fncache.cli.main import build_parser

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    _, commands = build_parser()
    for name, parser in commands.items():
        assert f"fncache {name}" in page, name
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in page or f"[{option}" in page, (name, option)


def test_entries_of_another_python_are_shown_and_cleared_apart(filled):
    """info counts entries per Python version, ls shows the versions of each function, and
    clear --python removes only the old version's entries (those a new interpreter never reads)."""
    from fncache.stores.disk import DiskStore

    _, _, cache = filled
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    store = DiskStore(cache)
    small = [e for e in store.entries() if e.function.endswith(":small")]
    for i, e in enumerate(small[:2]):  # what an older interpreter wrote: its own keys
        store.add(f"{i:032x}", store.get(e.key), dict(e.meta, python="3.10"))
    data = info(cache)
    assert data["entries"] == 7 and data["pythons"] == {here: 5, "3.10": 2}
    listing = fncache_cmd("ls", "--dir", cache, "--json")
    rows = {row["function"].rpartition(":")[2]: row for row in json.loads(listing.stdout)}
    assert rows["small"]["pythons"] == {here: 3, "3.10": 2} and rows["large"]["pythons"] == {here: 2}
    text = fncache_cmd("ls", "--dir", cache).stdout
    assert f"{here},3.10" in text and "PYTHON" in text.splitlines()[0]
    bad = fncache_cmd("clear", "--dir", cache, "--python", "3", "--yes")
    assert bad.returncode == 2 and "--python" in bad.stderr and "MAJOR.MINOR" in bad.stderr
    done = fncache_cmd("clear", "--dir", cache, "--python", "3.10", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == 2
    assert info(cache)["pythons"] == {here: 5}


@pytest.mark.slow
def test_a_known_function_filtered_to_nothing_gets_no_suggestion(step_job):
    """When the function has entries but the other filters leave none, nothing is suggested."""
    proc = console("clear", "--function", "step", "--older-than", "5d", "--dir", "cache", "--yes",
                   cwd=step_job)
    assert proc.returncode == 0 and "removed 0 entries" in proc.stdout
    assert proc.stderr == ""


def test_suggestions_escape_control_characters_in_planted_names(tmp_path):
    """A planted function name suggested by ls --function or explain is printed escaped on stderr."""
    from fncache.stores import open_store

    store = open_store(str(tmp_path / "s"))
    store.add("0" * 32, b"not a frame", {"function": "evil:st\x1b[2Jep"})
    for args in (["ls", "--function", "step"], ["explain", "stepp"]):
        err = fncache_cmd(*args, "--dir", str(tmp_path / "s")).stderr
        assert "\x1b" not in err and "did you mean 'evil:st\\x1b[2Jep'?" in err, err
