"""``python -m benchmarks`` runs to its end: every benchmark, in its quick form, prints its rows.

The benchmarks are how the speed and scale targets are checked (never by timed unit tests), so a
benchmark that breaks when the code under it moves must fail here, not on the day its figures are
needed. Nothing here depends on the figures: exit status 1 only says some target was missed on
this machine, and the rows are checked for shape, not for speed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(out), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    # 0: every target met; 1: some target missed on this machine (the figures are not judged here)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    for r in rows:
        assert r["name"] and r["target"] and r["baseline_name"], r
        for k in ("ours", "baseline"):
            assert isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] >= 0, r
    return rows


@pytest.mark.slow
def test_every_default_benchmark_runs_and_reports_its_rows(tmp_path: Path) -> None:
    """The default run (every benchmark but shared-scale), quick: each one's rows are there."""
    rows = _run(tmp_path, "--scale", "5000")
    names = " | ".join(r["name"] for r in rows)
    for needle in ("hit __main__ vs diskcache", "miss+store", "hash ", "fncache info at",
                   "fncache clear of", "peak memory", "sklearn Pipeline, new process: import+fit",
                   "fncache's import in it", "the load's floor vs joblib", "float (wide) vs joblib",
                   "dataclass instances vs joblib"):
        assert needle in names, (needle, names)


@pytest.mark.slow
def test_shared_scale_benchmark_runs(tmp_path: Path) -> None:
    """The shared-store summary benchmark (Redis and S3, started on loopback as the tests do)."""
    rows = _run(tmp_path, "--only", "shared-scale", "--scale", "200")
    kinds = {r["name"].rpartition("(")[2].rstrip(")") for r in rows}
    if os.environ.get("FNCACHE_REQUIRE_SERVERS") == "1":  # CI: both servers are there
        assert kinds == {"redis", "s3"}, kinds
    elif not kinds:
        pytest.skip("neither redis-server nor SeaweedFS is installed")
