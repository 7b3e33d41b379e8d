"""``fncache doctor``: is this environment, this store and this function's key in good shape?

Checks, each reported with a verdict and a one-line detail:

* the environment: Python, fncache and its dependencies' versions;
* the store: reachable, writable (a probe entry is added, read back and deleted), for a disk store its
  directory's permissions (0700 expected: a cache is a place where pickles can be planted), its
  parents (none writable by others, unless a secret is set), its database (SQLite's quick check; a
  damaged one moved aside), orphaned value files, and free space;
* a function's key stability: its fingerprint is computed in fresh interpreters under several
  ``PYTHONHASHSEED`` values; any difference is reported with the components that differ. An unstable
  fingerprint means a cache that silently never hits across runs;
* what a function's key holds by name rather than content: globals and class attributes that cannot
  be pickled (a lock, a connection, a logging handler) are keyed by their type and name, and state the
  function writes by the name it is read under. A change to their content is not a new key.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fncache.stores import Store

if TYPE_CHECKING:
    from fncache.stores.disk import DiskStore

__all__ = ["Check", "Report", "run"]


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.__dict__ for c in self.checks]}

    def __str__(self) -> str:
        lines = [f"{'ok ' if c.ok else 'BAD'}  {c.name:<18} {c.detail}" for c in self.checks]
        lines.append("all checks passed" if self.ok else "some checks FAILED")
        return "\n".join(lines)


def _probe(target: str) -> None:
    """Entry point of the subprocesses: print the target's fingerprint as JSON."""
    from fncache.code.fingerprint import fingerprint
    from fncache.code.targets import load_target

    obj, _ = load_target(target)
    obj = getattr(obj, "__wrapped__", obj)
    fp = fingerprint(obj)
    print(json.dumps({"digest": fp.digest.hex(), "components": fp.components,
                      "by_name": list(fp.by_name)}))


def _fingerprints(target: str, seeds: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for seed in seeds:
        # Loading the target runs its code; caching off means whatever it calls stores nothing.
        env = dict(os.environ, PYTHONHASHSEED=seed, FNCACHE_DISABLE="1")
        code = f"from fncache.cli.doctor import _probe; _probe({target!r})"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=300)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines()[-1:] or ["(no output)"])[0]
            missing = "fncache.code.targets.TargetError: "
            if tail.startswith(missing):  # the target cannot be found: say what is missing
                raise RuntimeError(f"cannot load {target}: {tail[len(missing):]}")
            raise RuntimeError(f"computing the fingerprint failed (seed {seed}): {tail}")
        out[seed] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def check_stability(report: Report, target: str, seeds: list[str]) -> None:
    try:
        runs = _fingerprints(target, seeds)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        report.add("key stability", False, str(e))
        return
    first_seed = seeds[0]
    first = runs[first_seed]
    differing: set[str] = set()
    for run in runs.values():
        if run["digest"] != first["digest"]:
            labels = set(first["components"]) | set(run["components"])
            differing |= {k for k in labels
                          if first["components"].get(k) != run["components"].get(k)}
    if differing:
        report.add("key stability", False,
                   f"{target} fingerprints differ across PYTHONHASHSEED {','.join(seeds)} in: "
                   + ", ".join(sorted(differing)))
    else:
        n = len(first["components"])
        report.add("key stability", True,
                   f"{target}: same fingerprint under PYTHONHASHSEED {','.join(seeds)} ({n} components)")
    check_by_name(report, target, first.get("by_name", []))


def check_by_name(report: Report, target: str, by_name: list[str]) -> None:
    """Report what the target's key holds by name, not content (a notice, not a failure)."""
    if not by_name:
        report.add("keyed by name", True, f"{target}: everything it reads is keyed by content")
        return
    report.add("keyed by name", True,
               f"{target}: {len(by_name)} value(s) keyed by type and name, not content (a change to "
               "their content is not seen; use fncache.ref or register to key them): "
               + "; ".join(by_name))


def check_environment(report: Report) -> None:
    import cloudpickle
    import diskcache
    import xxhash

    from fncache import __version__

    py = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    report.add("environment", True,
               f"Python {py}, fncache {__version__}, cloudpickle {cloudpickle.__version__}, "
               f"xxhash {xxhash.VERSION}, diskcache {diskcache.__version__}")
    if os.environ.get("FNCACHE_DISABLE"):
        report.add("caching enabled", False, "FNCACHE_DISABLE is set: every call runs uncached")


def check_store(report: Report, store: Store) -> None:
    key = uuid.uuid4().hex
    try:
        store.add(key, b"fncache-doctor", {"function": "fncache:doctor"})
        ok = store.get(key) == b"fncache-doctor"
        store.delete(key)
        report.add("store writable", ok, f"{store.url} ({store.kind})" if ok
                   else f"{store.url}: a probe entry did not read back")
    except Exception as e:  # any failure here is the finding
        report.add("store writable", False, f"{store.url}: {e}")
        return
    directory = store.local_directory
    if directory and os.path.isdir(directory):
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        private = not mode & (stat.S_IRWXG | stat.S_IRWXO)
        report.add("permissions", private,
                   f"{directory} is {mode:04o}" + ("" if private else
                   ": others can plant entries (pickles run code when loaded); chmod 700 it "
                   "or set a secret (FNCACHE_SECRET)"))
        check_disk_store(report, store)
        usage = shutil.disk_usage(directory)
        free = usage.free / usage.total if usage.total else 0.0
        report.add("free space", free > 0.05,
                   f"{usage.free / 2**30:.1f} GiB free ({free:.0%} of the file system)")


def check_disk_store(report: Report, store: Store) -> None:
    """A disk store's parents, database and orphaned value files."""
    from fncache.stores.disk import DiskStore

    if not isinstance(store, DiskStore):
        return
    _check_parents(report, store)
    _check_database(report, store)
    count, nbytes = store.orphans()
    report.add("orphaned files", True,
               f"{count} value files ({nbytes} bytes) belong to no entry"
               + ("; `fncache clear` or `prune` removes them" if count else ""))


def _check_parents(report: Report, store: DiskStore) -> None:
    """Whether others can swap the disk store's directory through one of its parents."""
    from fncache.stores._diskfs import unsafe_ancestors

    exposed = unsafe_ancestors(store.directory)
    secret = bool(os.environ.get("FNCACHE_SECRET"))
    report.add("parent directories", not exposed or secret,
               "private" if not exposed else
               f"{exposed[0]} is writable by others or not yours: they can swap the cache directory"
               + (" (entries are signed: FNCACHE_SECRET is set)" if secret else
                  "; fix its permissions or set a secret (FNCACHE_SECRET)"))


def _check_database(report: Report, store: DiskStore) -> None:
    """The disk store's SQLite database passes its quick check, and no damaged one was moved aside."""
    from fncache.stores.disk import DB_NAME

    quarantined = sorted(n for n in os.listdir(store.directory)
                         if n.startswith(DB_NAME + ".corrupt-") and not n.endswith(("-wal", "-shm")))
    try:
        verdict = store.integrity()
    except Exception as e:  # the failure is the finding
        verdict = str(e)
    detail = "cache.db passes SQLite's quick_check" if verdict == "ok" else f"cache.db: {verdict}"
    if quarantined:
        detail += (f"; a damaged database was moved aside to {', '.join(quarantined)} "
                   "(inspect or delete it)")
    report.add("database", verdict == "ok" and not quarantined, detail)


def run(store: Store, target: str | None, seeds: str = "1,2,random") -> Report:
    """All checks; ``target`` (``script.py:func`` or ``module:qualname``) adds the stability check."""
    report = Report()
    check_environment(report)
    check_store(report, store)
    if target:
        seed_list = [s.strip() for s in seeds.split(",") if s.strip()]
        check_stability(report, target, seed_list or ["1", "2"])
    return report
