"""Issue 32: the LocalCluster `--engine dask` starts without --scheduler runs only code of this
process. Its scheduler, nannies and workers speak TLS with a key pair made for the cluster alone
(distributed's Security.temporary(), in memory) and require the peer's certificate: a client
without it -- plain TCP, TLS with a certificate of its own, another local user -- is refused
before it can submit anything. Without `cryptography` the workers are threads behind no socket."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from ppl.distributed import cluster  # noqa: E402

#: Run by the refused clients: each attempt prints "refused" or "CONNECTED" (then it ran code).
PROBE = """
import sys
from distributed import Client
from distributed.security import Security
addr = sys.argv[1]
attempts = [("plain tcp", addr.replace("tls://", "tcp://"), None),
            ("no certificate", addr, None),
            ("a certificate of its own", addr, Security.temporary())]
for label, a, security in attempts:
    try:
        c = Client(a, timeout="5s", security=security)
        print("CONNECTED", label, c.submit(lambda: __import__("os").getuid()).result())
    except BaseException as e:
        print("refused", label, type(e).__name__)
"""


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("cryptography")
    with cluster.connect(workers=1) as c:
        yield c


def _probe(address: str, **kwargs) -> str:
    run = subprocess.run([kwargs.pop("python", sys.executable), "-c", PROBE, address],
                         capture_output=True, text=True, timeout=120, **kwargs)  # fmt: skip
    return run.stdout + run.stderr[-2000:]


def test_the_local_cluster_speaks_tls_on_loopback_and_runs_the_owners_code(client):
    address = client.scheduler.address
    assert address.startswith("tls://127.0.0.1:")
    assert client.submit(pow, 2, 10).result() == 1024
    for worker in client.scheduler_info()["workers"]:
        assert worker.startswith("tls://127.0.0.1:")


def test_a_client_without_the_clusters_certificate_is_refused(client):
    out = _probe(client.scheduler.address)
    assert out.count("refused") == 3 and "CONNECTED" not in out, out


def test_the_probe_does_connect_to_a_cluster_without_tls():
    """The control: the same probe reaches a plain-TCP cluster (what ppl started before) and
    runs code there."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as plain:  # fmt: skip
        out = _probe(plain.scheduler_address.replace("tcp://", "tls://"))
    assert "CONNECTED plain tcp" in out, out


def test_another_local_user_is_refused(client, tmp_path):
    """The audit's attack: while one user's fit runs, another user connects to its scheduler
    and submits code. Here the other user is `nobody` (uid 65534), with the same Python and
    distributed (the venv's site-packages), and cannot run anything."""
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("a second user needs root (to run the probe as uid 65534)")
    site = next(
        p for p in sys.path if p.endswith("site-packages") and Path(p, "distributed").is_dir()
    )
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    env = {"PYTHONPATH": site, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    os.chmod(tmp_path, 0o777)
    check = subprocess.run([python, "-c", "import distributed, cryptography"], env=env, user=65534,
                           group=65534, capture_output=True, text=True)  # fmt: skip
    if not Path(python).exists() or check.returncode != 0:
        pytest.skip(f"uid 65534 cannot run {python} with distributed: {check.stderr[-200:]}")
    out = _probe(client.scheduler.address, python=python, env=env, user=65534, group=65534,
                 cwd=str(tmp_path))  # fmt: skip
    assert out.count("refused") == 3 and "CONNECTED" not in out, out


def test_without_cryptography_the_workers_are_threads_behind_no_socket(monkeypatch):
    monkeypatch.setattr(cluster, "local_security", lambda: None)
    options = cluster.local_options(1)
    assert options["processes"] is False and "host" not in options
    with cluster.connect(workers=1) as c:
        assert c.scheduler.address.startswith("inproc://")
        assert c.submit(pow, 3, 2).result() == 9
