"""`--method dsvi`: doubly stochastic VI (Titsias & Lazaro-Gredilla 2014) with a full or
diagonal scale and a normal or Student-t standard distribution; minibatches of the rows in
memory, from a --stream file's chunks or on Dask workers; hyperparameters as point estimates."""

from __future__ import annotations

from ppl.data.build import ELBO_ROWS
from ppl.families.choice import POINT_ESTIMATE, FamilyPolicy
from ppl.methods.base import FitOptions, Fitted, Method


def elbo_sample_rows(batch: int) -> int:
    """Rows in the fixed sample the ELBO is estimated on under `--batch batch`."""
    return max(ELBO_ROWS, 2 * batch)


class DSVI(Method):
    name = fitted_as = "dsvi"
    families = FamilyPolicy(gaussian="full-rank Gaussian (DSVI)")
    takes_hyper = True
    takes_batch = True
    own_options = ("rank", "dof", "schedule")

    def rows_elsewhere(self, *, batch, optimizer, refine_draws) -> bool:
        return batch is not None  # minibatches drawn where the rows are

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        from ppl.inference.dsvi import closed_forms, fit_dsvi

        o = options
        kwargs = {} if o.grad_samples is None else {"grad_samples": o.grad_samples}
        log_joint, minibatch, elbo_rows = _minibatches(model, rng, o)
        hyper = [lat for lat in model.latents if lat.hyper]
        vi = fit_dsvi(
            log_joint, model.dim, rank=o.rank or "full", dof=o.dof,
            schedule=o.schedule or "adaptive", eta=o.eta, grad_log_joint=minibatch,
            point=[i for lat in hyper for i in range(lat.offset, lat.offset + lat.size)],
            closed=closed_forms(model),
            max_iter=o.iterations, tol_rel_obj=o.tol_rel_obj, elbo_samples=o.elbo_samples,
            init=init, seed=int(rng.integers(2**31)), progress=o.progress, monitor=o.monitor,
            checkpoint=o.checkpoint, **kwargs,
        )  # fmt: skip
        labels = {lat.name: POINT_ESTIMATE if lat.hyper else f"{vi.label} (DSVI)"
                  for lat in model.latents}  # fmt: skip
        sample = log_joint if o.batch is not None else None
        return Fitted(vi, self, labels, elbo_rows=elbo_rows, log_joint=sample)

    def method_text(self, result, rows: str) -> str:
        vi = result.vi
        return (f"DSVI ({vi.label}, {vi.schedule} learning rates, eta {vi.eta:g}, "
                f"{vi.grad_samples} draws per step{rows})")  # fmt: skip

    def rows_text(self, result, *, batch, stream, partitions, chunk_rows) -> str:
        rows = f", minibatches of {batch} rows" if batch else ""
        if stream is not None:
            rows += f" from {len(stream.chunks)} chunks of up to {chunk_rows} rows"
        if partitions is not None:
            workers = len(partitions.client.scheduler_info()["workers"])
            rows += (f" drawn on {workers} Dask worker{'s' if workers != 1 else ''} from "
                     f"{len(partitions.files)} files, {partitions.rows} rows")  # fmt: skip
        return rows

    def gaussian_name(self, vi) -> str:
        return vi.label


def _minibatches(model, rng, o: FitOptions):
    """The log joint the ELBO is estimated on (a fixed sample of the rows under --batch), the
    minibatch log joint the gradients use (None: the whole data), and (rows, of N) when the
    ELBO's rows are a sample."""
    from ppl.inference.subsample import (
        Batches,
        StreamBatches,
        SubsampledLogJoint,
        sample_log_joint,
    )

    log_joint, minibatch, elbo_rows = model.log_joint, None, None
    if o.partitions is not None:
        from ppl.distributed.gradient import DistributedLogJoint

        batches = Batches(model, o.batch, rng, rows=o.partitions.rows)
        minibatch = DistributedLogJoint(o.partitions, model, o.batch, int(rng.integers(2**63)))
        if o.checkpoint is not None:
            o.checkpoint.extras["minibatches"] = minibatch
    elif o.batch is not None:
        batches = (Batches(model, o.batch, rng) if o.stream is None
                   else StreamBatches(model, o.batch, rng, o.stream))  # fmt: skip
        minibatch = SubsampledLogJoint(batches)
        if o.checkpoint is not None:
            o.checkpoint.extras["batches"] = batches
    if o.batch is not None:
        log_joint, used = sample_log_joint(model, batches, elbo_sample_rows(o.batch), rng)
        if used < batches.N:
            elbo_rows = (used, batches.N)
    return log_joint, minibatch, elbo_rows
