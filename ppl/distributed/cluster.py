"""Connect to a Dask scheduler, or start a local cluster for the length of one fit."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ppl.errors import PplError

#: Each worker is one single-threaded process: the gradient is numpy on small arrays, where BLAS
#: threads only contend for the cores the other workers use.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: The HTTP routes of the local scheduler and workers: no task names, no worker list, no proxy.
HTTP_ROUTES = {
    "distributed.scheduler.http.routes": ["distributed.http.health"],
    "distributed.worker.http.routes": ["distributed.http.health"],
}


def require_dask():
    """distributed's Client and LocalCluster, or a message saying how to install them."""
    try:
        import dask.dataframe  # noqa: F401
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise PplError(
            f"--engine dask needs Dask ({e.name} is not installed): pip install "
            "'dask[dataframe,distributed]' pyarrow (in ppl's source tree: pip install '.[dask]')"
        ) from None
    return Client, LocalCluster


def local_security():
    """TLS for the local cluster, with a key pair made for it alone (in memory, never on disk):
    the scheduler, the workers and the nannies accept a connection only from a peer holding
    this cluster's certificate, which only this process and the workers it starts have. Without
    it, any local user could connect to the scheduler's port and run code as the user. None when
    the `cryptography` package is missing."""
    try:
        from distributed.security import Security

        return Security.temporary()
    except ImportError:
        return None


def local_options(workers: int | None) -> dict:
    """LocalCluster's options: worker processes speaking TLS on the loopback interface, or,
    without `cryptography`, workers as threads of this process that listen on no socket at all
    (in-process transport) -- slower, as the threads share one interpreter lock, but no other
    user can reach them. The scheduler's HTTP server (it always has one) listens on the loopback
    interface at a free port and answers only /health (http_routes)."""
    options = dict(
        n_workers=workers or os.cpu_count() or 1,
        threads_per_worker=1,
        dashboard_address="127.0.0.1:0",
        silence_logs=logging.CRITICAL,  # a data error is reported by the driver
    )
    security = local_security()
    if security is None:
        return dict(options, processes=False)
    return dict(options, processes=True, host="127.0.0.1", protocol="tls://",
                security=security, env=WORKER_ENV)  # fmt: skip


@contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator:
    """A Client of the scheduler at `scheduler`, or of a LocalCluster of `workers` processes on
    the loopback interface that only this process can reach (local_options), closed (with its
    workers) on exit."""
    Client, LocalCluster = require_dask()
    cluster = None
    # a lost scheduler or worker is reported by the fit in one line; distributed's own logger
    # would print its tracebacks first
    names = [
        "distributed",
        *(n for n in logging.root.manager.loggerDict if n.startswith("distributed.")),
    ]
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError, ValueError) as e:
                raise PplError(f"--scheduler {scheduler}: cannot connect ({e})") from None
        else:
            import dask

            with dask.config.set(HTTP_ROUTES):
                cluster = LocalCluster(**local_options(workers))
            client = Client(cluster)
        if not client.scheduler_info()["workers"]:
            client.wait_for_workers(1, timeout=60)
    except BaseException:
        if cluster is not None:
            cluster.close()
        _restore(levels)
        raise
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        _restore(levels)


def _restore(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
