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


@contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator:
    """A Client of the scheduler at `scheduler`, or of a LocalCluster of `workers` processes on
    the loopback interface, closed (with its workers) on exit."""
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
            cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=":0",  # any free port: never clash with a running cluster
                silence_logs=logging.CRITICAL,  # a data error is reported by the driver
                env=WORKER_ENV,
            )
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
