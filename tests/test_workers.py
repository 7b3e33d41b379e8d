"""Memoized functions in worker pools and across machines-worth of processes, on shared stores."""

from __future__ import annotations

import pytest

from .helpers import run_py, write

pytestmark = pytest.mark.slow  # real kernels / worker pools: minutes, not seconds

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


def _memoized_counter(url, **store_options):
    import fncache

    calls = []

    def compute(x):
        calls.append(x)
        return x * 3

    return fncache.memoize(store=url, store_options=store_options)(compute), calls


def test_stopped_redis_is_a_logged_miss_not_an_exception(redis_factory, caplog):
    """When the Redis server goes away, memoized calls still return right values, with a warning."""
    import logging

    server = redis_factory()
    f, calls = _memoized_counter(server.url, socket_connect_timeout=1, prefix="gone:")
    assert f(1) == 3 and f(1) == 3
    assert calls == [1]
    server.stop()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1) == 3
        assert f(2) == 6
    assert calls == [1, 1, 2]
    assert "treated as a miss" in caplog.text
    assert f.cache_info().errors >= 2


def test_full_redis_skips_the_store_and_returns_the_value(redis_factory, caplog):
    """A Redis at maxmemory makes stores fail: the result is still returned, and reads keep working."""
    import logging

    server = redis_factory()
    client = server.client()
    f, calls = _memoized_counter(server.url, prefix="full:")
    assert f(0) == 0
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1")  # below what is in use: every write is refused
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(5) == 15
    assert "write failed" in caplog.text or "treated as a miss" in caplog.text
    assert f(0) == 0 and calls == [0, 5], "the entry stored before the server filled up still hits"


def test_stopped_s3_server_is_a_logged_miss(s3_factory, monkeypatch, caplog):
    """When the S3 server goes away, memoized calls still return right values, with a warning."""
    import logging

    server = s3_factory()
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    f, calls = _memoized_counter(server.url())
    assert f(4) == 12 and f(4) == 12
    assert calls == [4]
    server.stop()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(4) == 12
    assert calls == [4, 4]
    assert "treated as a miss" in caplog.text
