"""The minibatch log joint of ``--engine dask``: the workers' row terms plus the driver's prior
and log-Jacobian terms, differentiable by autograd like any log joint (ppl/distributed/__init__)."""

from __future__ import annotations

import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive

from ppl.errors import FitError, PplError
from ppl.inference.subsample import Batches, check_row_wise, require_global

from .partitions import PartitionedData, program


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

    def __reduce__(self):
        return WorkerModel, self.args

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


def rows_per_partition(lengths: np.ndarray, batch: int) -> np.ndarray:
    """b_p = max(1, round(B n_p / N)) rows of each partition per step (none of an empty one)."""
    n = np.asarray(lengths)
    return np.minimum(n, np.maximum(1, np.rint(batch * n / n.sum()))).astype(int)


@primitive
def _rows_part(zeta, engine):
    return engine.rows_log_lik(zeta)


defvjp(_rows_part, lambda ans, zeta, engine: lambda g: g[:, None] * engine.last_grad)


class DistributedLogJoint:
    """An unbiased, differentiable estimate of the full-data log joint from B rows per call,
    drawn on the workers from their own partitions (stratified: b_p rows of partition p)."""

    def __init__(self, data: PartitionedData, model, batch: int, seed: int):
        """`model`: the driver's model on a sample of the rows (PartitionedData.sample)."""
        self.data, self.client, self.seed = data, data.client, int(seed)
        self.counts = rows_per_partition(data.lengths, batch)
        self.step = 0
        self.last_grad = None
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

    def __call__(self, zeta):
        with np.errstate(all="ignore"):
            prior = self.global_model.log_joint_scaled(zeta, self.global_scales)
        return prior + _rows_part(zeta, self)

    def rows_log_lik(self, zeta: np.ndarray) -> np.ndarray:
        """The workers' sum; its gradient is kept for the vjp."""
        from distributed import KilledWorker

        self.step += 1
        zeta = np.ascontiguousarray(zeta, dtype=float)
        parts = self.data.parts
        holders = self.client.who_has(parts)
        groups: dict[str | None, list[int]] = {}
        for p, f in enumerate(parts):
            if not self.counts[p]:  # a file with a header and no rows
                continue
            where = holders.get(f.key) or (None,)
            groups.setdefault(where[0], []).append(p)
        futures = [
            self.client.submit(
                partitions_step,
                self.template,
                [parts[p] for p in ps],
                ps,
                zeta,
                self.seed,
                self.step,
                [int(self.counts[p]) for p in ps],
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
        ordered = sorted((r for chunk in results for r in chunk), key=lambda r: r[0])
        value = np.zeros(zeta.shape[0])
        grad = np.zeros_like(zeta)
        for _, v, g in ordered:
            value = value + v
            grad = grad + g
        self.last_grad = grad
        return value

    def get_state(self) -> dict:
        return {"step": self.step}

    def set_state(self, state: dict) -> None:
        self.step = int(state["step"])
