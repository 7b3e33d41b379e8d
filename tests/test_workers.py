"""Memoized functions in worker pools and across machines-worth of processes, on shared stores."""

from __future__ import annotations

import pytest

from .helpers import run_py, write

JOB = """
import os, sys
import fncache

@fncache.memoize(store=os.environ["STORE_URL"])
def work(x):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("x\\n")
    return {"square": x * x, "tag": "v1"}

def computed():
    path = os.environ["COUNT_FILE"]
    return open(path).read().count("x") if os.path.exists(path) else 0

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "plain":
        assert [work(i)["square"] for i in range(6)] == [i * i for i in range(6)]
    elif mode == "joblib":
        from joblib import Parallel, delayed
        for _ in range(2):
            out = Parallel(n_jobs=2, backend="loky")(delayed(work)(i) for i in range(8))
            assert [o["square"] for o in out] == [i * i for i in range(8)]
            print("pass", computed())
    elif mode == "dask":
        from dask.distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster) as client:
            for _ in range(2):
                futures = client.map(work, range(8), pure=False)
                assert [o["square"] for o in client.gather(futures)] == [i * i for i in range(8)]
                print("pass", computed())
    print("done", computed())
"""


@pytest.fixture(params=["disk", "redis", "s3"])
def store_url(request, tmp_path):
    """A store URL of each kind; the shared ones run on real servers."""
    if request.param == "disk":
        return str(tmp_path / "cache"), {}
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        db_flush = server.client()
        db_flush.flushdb()
        return server.url, {}
    server = request.getfixturevalue("s3_server")
    return server.url(), dict(server.env)


def _env(tmp_path, url, extra):
    return {"STORE_URL": url, "COUNT_FILE": str(tmp_path / "count"), **extra}


def test_two_checkouts_share_hits(tmp_path, store_url):
    """The same script in two directories, under two hash seeds, computes each call once."""
    url, extra = store_url
    a = write(tmp_path / "alice" / "repo" / "job.py", JOB)
    b = write(tmp_path / "bob" / "work" / "repo" / "job.py", JOB)
    env = _env(tmp_path, url, extra)
    assert run_py(a, "plain", env=env, seed="1", cwd=a.parent).stdout.split()[-1] == "6"
    assert run_py(b, "plain", env=env, seed="2", cwd=b.parent).stdout.split()[-1] == "6"


@pytest.mark.parametrize("kind", ["disk", "redis"])
def test_joblib_loky_second_pass_computes_nothing(tmp_path, kind, request):
    """Under joblib.Parallel (loky), a second pass over the same calls is all hits, from any worker."""
    url = str(tmp_path / "cache") if kind == "disk" else request.getfixturevalue("redis_server").url
    if kind == "redis":
        request.getfixturevalue("redis_server").client().flushdb()
    pytest.importorskip("joblib")
    script = write(tmp_path / "job.py", JOB)
    out = run_py(script, "joblib", env=_env(tmp_path, url, {}), timeout=300).stdout.split("\n")
    assert out[0] == "pass 8" and out[1] == "pass 8", out


def test_dask_local_cluster_second_pass_computes_nothing(tmp_path, redis_server):
    """On a dask LocalCluster with worker processes, a second pass over the same calls is all hits."""
    pytest.importorskip("distributed")
    redis_server.client().flushdb()
    script = write(tmp_path / "job.py", JOB)
    out = run_py(script, "dask", env=_env(tmp_path, redis_server.url, {}), timeout=300).stdout
    lines = [line for line in out.splitlines() if line.startswith("pass")]
    assert lines == ["pass 8", "pass 8"], out
