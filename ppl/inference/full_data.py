"""The full-data log joint of a model with many rows, summed block by block: the default road
for `--stream` (the chunks of one file, read back one at a time), `--engine dask` (partitions on
workers, ppl.distributed) and an in-memory model with many rows (one block, in chunks of draws,
so that a gradient's arrays stay small whatever the number of rows).

Per pass, every block of rows returns, for the fixed draws, the sum of its rows' terms and its
gradient (or Hessian-vector products); the driver adds the prior and log-Jacobian terms, which
no row holds. To the deterministic road (its L-BFGS, Hessian-vector products and PSIS check)
this is one more log joint: values, gradients and HVPs through a primitive with its own
second-order VJP, the gradient of the draws last evaluated kept, so a value and its gradient
are one pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive
from autograd.tracer import isbox

from ppl.inference.hessian import batched_hvp
from ppl.inference.subsample import Batches, check_row_wise, require_global

#: Numbers per (draws x rows) array a block of rows is worked on at once (32 MB).
ROW_CELLS = 1 << 22


def row_sums(terms: Callable, rows: int, zeta: np.ndarray, vectors: np.ndarray | None,
             gradient: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:  # fmt: skip
    """A block's per-draw sum of its row terms (`terms(z)`, from the block's own model) and
    its gradient in zeta, or (with `vectors`) the Hessian-vector products of that sum, in
    chunks of draws whose (draws x rows) arrays stay near ROW_CELLS numbers."""
    step = max(1, ROW_CELLS // max(1, rows))
    values, products = [], []
    with np.errstate(all="ignore"):
        for start in range(0, zeta.shape[0], step):
            z = zeta[start : start + step]
            if vectors is not None:
                products.append(batched_hvp(terms, z, vectors[start : start + step]))
            elif gradient:
                vjp, value = make_vjp(terms)(z)
                values.append(np.asarray(value, dtype=float))
                products.append(np.asarray(vjp(np.ones(z.shape[0])), dtype=float))
            else:
                values.append(np.asarray(terms(z), dtype=float))
    value = np.concatenate(values) if values else None
    return value, (np.concatenate(products) if products else None)


class PriorTerms:
    """The terms no row holds (priors, log-Jacobians, anything not per row), from the driver's
    model on a sample of the rows with its row terms weighted 0."""

    def __init__(self, model, rows: int, option: str, why: str):
        driver = Batches(model, 1, np.random.default_rng(0), rows=rows)
        require_global(driver)
        check_row_wise(driver, option, why)
        driver.set_rows(np.arange(1))
        self.model = driver.batch_model
        self.scales = dict.fromkeys(driver.row_keys(), 0.0)
        self.row_keys = driver.row_keys()

    def __call__(self, zeta):
        with np.errstate(all="ignore"):
            return self.model.log_joint_scaled(zeta, self.scales)


@primitive
def _all_rows(zeta, engine):
    return engine.values(zeta)


@primitive
def _all_rows_grad(zeta, g, engine):
    return g[:, None] * engine.gradients(zeta)


defvjp(_all_rows, lambda ans, zeta, engine: lambda g: _all_rows_grad(zeta, g, engine))
defvjp(
    _all_rows_grad,
    lambda ans, zeta, g, engine: lambda v: g[:, None] * engine.hvp(zeta, v),
    lambda ans, zeta, g, engine: lambda v: anp.sum(v * engine.gradients(zeta), axis=1),
)


class FullDataLogJoint:
    """The full-data log joint of S draws: `rows.prior(zeta)` plus `rows.sums(zeta, vectors,
    gradient)` -> (S sums, S x D gradients or products) over every block of rows."""

    def __init__(self, rows, checkpoint=None):
        """`checkpoint` (ppl.inference.checkpoint.Checkpointer): every pass's sums are kept by the
        hash of
        what was sent and saved every `checkpoint.every` passes and on SIGINT/SIGTERM (then
        Interrupted is raised); a resumed fit replays the saved passes without reading the rows.
        The road is deterministic, so it asks for the same passes and ends in the same
        numbers, bit for bit."""
        self.rows = rows
        self.passes = 0
        self._last: tuple[bytes, np.ndarray, np.ndarray] | None = None
        self.checkpoint = checkpoint
        self.done: dict[bytes, tuple] = {}
        if checkpoint is not None and checkpoint.resume is not None:
            self.done = dict(checkpoint.resume["state"].get("passes", {}))

    def __call__(self, zeta, binary: bool = False):
        if not isbox(zeta) and self.checkpoint is None:  # a value alone: no gradients to sum
            self.passes += 1
            zeta = np.ascontiguousarray(zeta, dtype=float)
            return self.rows.prior(zeta) + self.rows.sums(zeta, None, False)[0]
        return self.rows.prior(zeta) + _all_rows(zeta, self)

    @staticmethod
    def _key(*arrays: np.ndarray | None) -> bytes:
        digest = hashlib.sha256()
        for a in arrays:
            if a is not None:
                a = np.ascontiguousarray(a, dtype=float)
                digest.update(np.asarray(a.shape).tobytes() + a.tobytes())
            digest.update(b"|")
        return digest.digest()

    def _sum(self, zeta: np.ndarray, vectors: np.ndarray | None):
        zeta = np.ascontiguousarray(zeta, dtype=float)
        if vectors is not None:
            vectors = np.ascontiguousarray(vectors, dtype=float)
        key = self._key(zeta, vectors) if self.checkpoint is not None else b""
        if key in self.done:
            return self.done[key]
        self.passes += 1
        sums = self.rows.sums(zeta, vectors, True)
        if self.checkpoint is not None:
            self._save(key, sums)
        return sums

    def _save(self, key: bytes, sums: tuple) -> None:
        """Keep this pass; write the checkpoint every `every` passes, and stop on a signal."""
        c = self.checkpoint
        self.done[key] = sums
        if c.stop_signal is not None or self.passes % c.every == 0:
            c.save(0, {"passes": self.done})
        if c.stop_signal is not None:
            raise c.interrupted(self.passes, "pass")

    def values(self, zeta: np.ndarray) -> np.ndarray:
        value, gradient = self._sum(zeta, None)
        self._last = (self._key(zeta, None), value, gradient)
        return value

    def gradients(self, zeta: np.ndarray) -> np.ndarray:
        if self._last is None or self._last[0] != self._key(zeta, None):
            self.values(zeta)
        return self._last[2]

    def hvp(self, zeta: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        return self._sum(zeta, vectors)[1]


class StreamedRows:
    """Every chunk of a --stream file (ppl.data.stream.CsvStream, scanned with a binary copy),
    one at a time: memory holds one chunk and its (draws x rows) arrays, whatever the file's
    length."""

    def __init__(self, stream, model):
        """`model`: the driver's model on the stream's sample of rows (build_streamed)."""
        self.stream, self.lowered = stream, model.ir
        self.prior = PriorTerms(model, stream.rows, "--stream", "the file is read a chunk at a "
                                "time")  # fmt: skip
        self.weights = dict.fromkeys(self.prior.row_keys, 1.0)

    def sums(self, zeta: np.ndarray, vectors: np.ndarray | None, gradient: bool):
        from ppl.runtime.compiler import CompiledModel

        value, total = np.zeros(zeta.shape[0]), np.zeros_like(zeta)
        for i, chunk in enumerate(self.stream.chunks):
            model = CompiledModel(self.lowered, self.stream.read_binary(i))

            def terms(z, model=model):
                return model.log_joint_part(z, self.weights)

            v, g = row_sums(terms, chunk.rows, zeta, vectors, gradient)
            if v is not None:
                value = value + v
            if g is not None:
                total = total + g
        return value, total


class WholeRows:
    """An in-memory model's log joint (prior included) as one block, summed in chunks of draws:
    a gradient of 32 draws of a 10^6-row logistic regression otherwise keeps twenty (32 x 10^6)
    arrays for its reverse pass (5.3 GB)."""

    def __init__(self, log_joint: Callable, rows: int):
        self.log_joint, self.n = log_joint, rows

    def prior(self, zeta):
        return 0.0

    def sums(self, zeta: np.ndarray, vectors: np.ndarray | None, gradient: bool):
        return row_sums(self.log_joint, self.n, zeta, vectors, gradient)
