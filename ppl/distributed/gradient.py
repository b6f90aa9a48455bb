"""The log joints of ``--engine dask``: the workers' row terms plus the driver's prior and
log-Jacobian terms, differentiable by autograd like any log joint (ppl/distributed/__init__).
DistributedLogJoint estimates it from a minibatch of rows (DSVI); FullDataLogJoint sums every
row, with gradients and Hessian-vector products, for the default deterministic road."""

from __future__ import annotations

import hashlib

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive

from ppl.errors import FitError, PplError
from ppl.inference.hessian import batched_hvp
from ppl.inference.subsample import Batches, check_row_wise, require_global

from .partitions import PartitionedData, program

#: Numbers per (draws x rows) array a worker works on at once in a full-data pass (32 MB).
ROW_CELLS = 1 << 22


class WorkerModel:
    """The model on a worker, with the map from a partition's rows to its per-row terms. Sent
    as its constructor's arguments and rebuilt where it lands (the compiled model holds
    closures); a worker keeps it in memory across steps."""

    def __init__(self, source: str, model_path: str, values: dict, rows: int):
        from ppl.compiler import CompiledModel

        self.args = (source, model_path, values, rows)
        model = CompiledModel(program(source, model_path), values)
        self.batches = Batches(model, 1, np.random.default_rng(0), rows=rows)
        self.row_keys = self.batches.row_keys()
        self._whole: dict[int, object] = {}  # partition index -> its model on all its rows

    def __reduce__(self):
        return WorkerModel, self.args

    def all_rows(self, p: int, part: dict, zeta: np.ndarray, vectors: np.ndarray | None):
        """Every row's terms of partition p: per draw, their sum and its gradient in zeta, or
        (with `vectors`) the Hessian-vector products H_s v_s of that sum. In chunks of draws,
        so that a chunk's (draws x rows) arrays stay near ROW_CELLS numbers."""
        model = self._whole.get(p)
        if model is None:
            from ppl.compiler import CompiledModel

            model = CompiledModel(program(*self.args[:2]), part)
            self._whole = {**self._whole, p: model}
        weights = dict.fromkeys(self.row_keys, 1.0)

        def terms(z):
            return model.log_joint_part(z, weights)

        n = max(1, len(part[self.batches.sliced[0]]))
        step = max(1, ROW_CELLS // n)
        values, products = [], []
        with np.errstate(all="ignore"):
            for start in range(0, zeta.shape[0], step):
                z = zeta[start : start + step]
                if vectors is None:
                    vjp, value = make_vjp(terms)(z)
                    values.append(np.asarray(value, dtype=float))
                    products.append(np.asarray(vjp(np.ones(z.shape[0])), dtype=float))
                else:
                    products.append(batched_hvp(terms, z, vectors[start : start + step]))
        value = np.concatenate(values) if values else None
        return value, np.concatenate(products)

    def rows_log_lik(self, part: dict, zeta: np.ndarray, rows: np.ndarray, weight: float):
        """weight x the rows' terms, per draw, and its gradient in zeta."""
        b = self.batches
        b.pool, b.B = part, len(rows)
        b.set_rows(rows)
        weights = dict.fromkeys(self.row_keys, weight)
        with np.errstate(all="ignore"):
            vjp, value = make_vjp(lambda z: b.batch_model.log_joint_part(z, weights))(zeta)
            grad = vjp(np.ones(zeta.shape[0]))
        return np.asarray(value, dtype=float), np.asarray(grad, dtype=float)


def partitions_step(
    template: WorkerModel,
    parts: list[dict],
    indices: list[int],
    zeta: np.ndarray,
    seed: int,
    step: int,
    counts: list[int],
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """One step on one worker: for each of its partitions p, b_p rows drawn by (seed, step, p)
    and their terms weighted n_p / b_p."""
    out = []
    name = template.batches.sliced[0]
    for part, p, b in zip(parts, indices, counts, strict=True):
        n = len(part[name])
        rows = np.sort(np.random.default_rng([seed, step, p]).choice(n, b, replace=False))
        value, grad = template.rows_log_lik(part, zeta, rows, n / b)
        out.append((p, value, grad))
    return out


def partitions_full(template: WorkerModel, parts: list[dict], indices: list[int],
                    zeta: np.ndarray, vectors: np.ndarray | None):  # fmt: skip
    """One full-data pass on one worker: every row of each of its partitions."""
    return [(p, *template.all_rows(p, part, zeta, vectors))
            for part, p in zip(parts, indices, strict=True)]  # fmt: skip


def rows_per_partition(lengths: np.ndarray, batch: int) -> np.ndarray:
    """b_p = max(1, round(B n_p / N)) rows of each partition per step (none of an empty one)."""
    n = np.asarray(lengths)
    return np.minimum(n, np.maximum(1, np.rint(batch * n / n.sum()))).astype(int)


@primitive
def _rows_part(zeta, engine):
    return engine.rows_log_lik(zeta)


defvjp(_rows_part, lambda ans, zeta, engine: lambda g: g[:, None] * engine.last_grad)


class _OnWorkers:
    """What both log joints share: the driver's prior and log-Jacobian terms, the model sent
    to the workers once, and a pass over the partitions, each on the worker that holds it."""

    def __init__(self, data: PartitionedData, model):
        """`model`: the driver's model on a sample of the rows (PartitionedData.sample)."""
        self.data, self.client = data, data.client
        self.step = 0
        # the prior and log-Jacobian terms: the driver's model at one row, its row terms
        # weighted 0
        driver = Batches(model, 1, np.random.default_rng(0), rows=data.rows)
        require_global(driver)
        check_row_wise(driver, "--engine dask", "the partitions are read one file at a time")
        driver.set_rows(np.arange(1))
        self.global_model = driver.batch_model
        self.global_scales = dict.fromkeys(driver.row_keys(), 0.0)
        few = {k: (np.asarray(v)[:2] if k in data.row_vars else v)
               for k, v in model.data.items() if k in data.data_vars}  # fmt: skip
        few[data.rows_name] = np.array(min(2, data.rows))
        program_ = model.checked.program
        self.template = self.client.submit(
            WorkerModel, program_.source, program_.filename, few, data.rows, pure=False
        )

    def prior(self, zeta):
        with np.errstate(all="ignore"):
            return self.global_model.log_joint_scaled(zeta, self.global_scales)

    def _pass(self, task, used: list[int], *args, per_partition: list | None = None) -> list:
        """`task(template, parts, indices, *args[, per-partition args])` on the workers holding
        partitions `used`, gathered and ordered by partition (so that sums do not depend on
        which worker held what)."""
        from distributed import KilledWorker

        self.step += 1
        parts = self.data.parts
        holders = self.client.who_has(parts)
        groups: dict[str | None, list[int]] = {}
        for p in used:
            where = holders.get(parts[p].key) or (None,)
            groups.setdefault(where[0], []).append(p)
        futures = [
            self.client.submit(
                task,
                self.template,
                [parts[p] for p in ps],
                ps,
                *args,
                *([[per_partition[p] for p in ps]] if per_partition is not None else []),
                pure=False,
                workers=None if addr is None else [addr],
                allow_other_workers=True,
            )  # fmt: skip
            for addr, ps in groups.items()
        ]
        try:
            results = self.client.gather(futures)
        except KilledWorker as e:
            raise FitError(f"--engine dask: workers kept dying on one step ({e})") from None
        except PplError:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. the scheduler went away: one line
            raise FitError(f"--engine dask: step {self.step} failed: {type(e).__name__}: "
                           f"{str(e).splitlines()[0][:300]}") from None  # fmt: skip
        return sorted((r for chunk in results for r in chunk), key=lambda r: r[0])

    def get_state(self) -> dict:
        return {"step": self.step}

    def set_state(self, state: dict) -> None:
        self.step = int(state["step"])


class DistributedLogJoint(_OnWorkers):
    """An unbiased, differentiable estimate of the full-data log joint from B rows per call,
    drawn on the workers from their own partitions (stratified: b_p rows of partition p)."""

    def __init__(self, data: PartitionedData, model, batch: int, seed: int):
        super().__init__(data, model)
        self.seed = int(seed)
        self.counts = rows_per_partition(data.lengths, batch)
        self.last_grad = None

    def __call__(self, zeta):
        return self.prior(zeta) + _rows_part(zeta, self)

    def rows_log_lik(self, zeta: np.ndarray) -> np.ndarray:
        """The workers' sum; its gradient is kept for the vjp."""
        zeta = np.ascontiguousarray(zeta, dtype=float)
        used = [p for p in range(len(self.data.parts)) if self.counts[p]]  # skip empty files
        ordered = self._pass(partitions_step, used, zeta, self.seed, self.step + 1,
                             per_partition=[int(c) for c in self.counts])  # fmt: skip
        value = np.zeros(zeta.shape[0])
        grad_ = np.zeros_like(zeta)
        for _, v, g in ordered:
            value = value + v
            grad_ = grad_ + g
        self.last_grad = grad_
        return value


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


class FullDataLogJoint(_OnWorkers):
    """The full-data log joint of S draws, every row of every partition summed on the worker
    that holds it: the default deterministic road's objective under --engine dask (its
    L-BFGS, Hessian-vector products and PSIS check call it like any log joint). A pass sends
    the draws (and the vectors of a Hessian-vector product) and gets back, per partition, S
    sums and their S x D gradients or products; the rows stay where they are. The gradient of
    the draws last evaluated is kept, so a value and its gradient are one pass."""

    def __init__(self, data: PartitionedData, model, checkpoint=None):
        """`checkpoint` (ppl.checkpoint.Checkpointer): every pass's sums are kept by the hash of
        what was sent and saved every `checkpoint.every` passes and on SIGINT/SIGTERM (then
        Interrupted is raised); a resumed fit replays the saved passes without the workers.
        The road is deterministic, so it asks for the same passes and ends in the same
        numbers, bit for bit."""
        super().__init__(data, model)
        self.passes = 0
        self._last: tuple[bytes, np.ndarray, np.ndarray] | None = None
        self.checkpoint = checkpoint
        self.done: dict[bytes, tuple] = {}
        if checkpoint is not None and checkpoint.resume is not None:
            self.done = dict(checkpoint.resume["state"].get("passes", {}))

    def __call__(self, zeta, binary: bool = False):
        return self.prior(zeta) + _all_rows(zeta, self)

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
        used = [p for p in range(len(self.data.parts)) if self.data.lengths[p]]
        ordered = self._pass(partitions_full, used, zeta, vectors)
        value = np.zeros(zeta.shape[0])
        total = np.zeros_like(zeta)
        for _, v, g in ordered:
            if v is not None:
                value = value + v
            total = total + g
        if self.checkpoint is not None:
            self._save(key, (value, total))
        return value, total

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
