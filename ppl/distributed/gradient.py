"""The log joints of ``--engine dask``: the workers' row terms plus the driver's prior and
log-Jacobian terms, differentiable by autograd like any log joint (ppl/distributed/__init__).
DistributedLogJoint estimates it from a minibatch of rows (DSVI); `full_data_log_joint` sums
every row, with gradients and Hessian-vector products, for the default deterministic road
(ppl.inference.full_data, the partitions as its blocks of rows)."""

from __future__ import annotations

import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive

from ppl.errors import FitError, PplError
from ppl.inference.full_data import FullDataLogJoint, PriorTerms, row_sums
from ppl.inference.subsample import Batches

from .partitions import PartitionedData, program


class WorkerModel:
    """The model on a worker, with the map from a partition's rows to its per-row terms. Sent
    as its constructor's arguments and rebuilt where it lands (the compiled model holds
    closures); a worker keeps it in memory across steps."""

    def __init__(self, source: str, model_path: str, values: dict, rows: int):
        from ppl.runtime.compiler import CompiledModel

        self.args = (source, model_path, values, rows)
        model = CompiledModel(program(source, model_path), values)
        self.batches = Batches(model, 1, np.random.default_rng(0), rows=rows)
        self.row_keys = self.batches.row_keys()
        self._whole: dict[int, object] = {}  # partition index -> its model on all its rows

    def __reduce__(self):
        return WorkerModel, self.args

    def all_rows(self, p: int, part: dict, zeta: np.ndarray, vectors: np.ndarray | None):
        """Every row's terms of partition p: per draw, their sum and its gradient in zeta, or
        (with `vectors`) the Hessian-vector products H_s v_s of that sum (ppl.inference.full_data
        .row_sums); the partition's model is kept for the next pass."""
        model = self._whole.get(p)
        if model is None:
            from ppl.runtime.compiler import CompiledModel

            model = CompiledModel(program(*self.args[:2]), part)
            self._whole = {**self._whole, p: model}
        weights = dict.fromkeys(self.row_keys, 1.0)
        rows = len(part[self.batches.sliced[0]])
        return row_sums(lambda z: model.log_joint_part(z, weights), rows, zeta, vectors)

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
        self.prior = PriorTerms(model, data.rows, "--engine dask", "the partitions are read one "
                                "file at a time")  # fmt: skip
        few = {k: (np.asarray(v)[:2] if k in data.row_vars else v)
               for k, v in model.data.items() if k in data.data_vars}  # fmt: skip
        few[data.rows_name] = np.array(min(2, data.rows))
        program_ = model.checked.program
        self.template = self.client.submit(
            WorkerModel, program_.source, program_.filename, few, data.rows, pure=False
        )

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


class DaskRows(_OnWorkers):
    """Every row of every partition, summed on the worker that holds it: a pass sends the draws
    (and the vectors of a Hessian-vector product) and gets back, per partition, S sums and
    their S x D gradients or products; the rows stay where they are."""

    def sums(self, zeta: np.ndarray, vectors: np.ndarray | None, gradient: bool = True):
        used = [p for p in range(len(self.data.parts)) if self.data.lengths[p]]
        ordered = self._pass(partitions_full, used, zeta, vectors)
        value = np.zeros(zeta.shape[0])
        total = np.zeros_like(zeta)
        for _, v, g in ordered:
            if v is not None:
                value = value + v
            total = total + g
        return value, total


def full_data_log_joint(data: PartitionedData, model, checkpoint=None) -> FullDataLogJoint:
    """The full-data log joint over Dask partitions, checkpointed per pass (see
    ppl.inference.full_data.FullDataLogJoint)."""
    return FullDataLogJoint(DaskRows(data, model), checkpoint)
