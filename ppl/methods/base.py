"""What every fit method is: the interface ppl.pipeline dispatches to and ppl.outputs.report asks
to describe a fit, and the options a fit is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl.families.choice import FamilyPolicy
from ppl.families.registry import GAUSSIAN

#: The defaults of a fit, the same for `ppl fit`, ppl.Model.fit and ppl.pipeline.fit.
#: tol_rel_obj None: the named stochastic methods end at their optimum (ppl.inference.stopping);
#: a number asks for Stan's relative-ELBO rule instead (the default road takes Stan's 0.01).
DEFAULTS = {"method": "auto", "seed": 1, "draws": 1000, "iterations": 10000, "tol_rel_obj": None}


@dataclass
class FitOptions:
    """The options of one fit (ppl.pipeline.fit's keywords): see its docstring."""

    iterations: int = DEFAULTS["iterations"]
    seed: int = DEFAULTS["seed"]
    draws: int = DEFAULTS["draws"]
    tol_rel_obj: float | None = DEFAULTS["tol_rel_obj"]
    eta: float | None = None
    grad_samples: int | None = None
    elbo_samples: int = 100
    refine_draws: int = 64
    families: dict[str, str] | None = None
    optimizer: str | None = None
    estimator: str = "rb+cv"
    batch: int | None = None
    rank: str | None = None
    dof: float | None = None
    schedule: str | None = None
    stream: Any = None
    progress: Callable | None = None
    monitor: Callable | None = None
    checkpoint: Any = None
    partitions: Any = None
    reparam: str = "auto"  # non-centring: auto (the default road decides), none, noncentre
    init: Any = None  # the unconstrained start (the API's inits=); None: Stan's uniform(-2, 2)
    # --method svi (ppl.methods.svi): the local step and the Robbins-Monro schedule
    local: str = "gibbs"  # gibbs | meanfield
    burnin: int = 3
    samples: int = 3
    kappa: float = 0.75
    tau: float = 1.0
    local_draws: str = "auto"  # auto | all | means (ppl.inference.local_rows)


@dataclass
class Fitted:
    """What a method's fit made: q (`vi`), the method that describes it (auto's stochastic road
    is described by SGVB's, ADVI's or the mixed fit's), the choice of families it ended with,
    the polish record, and the log joint q is checked against when not the model's own."""

    vi: Any
    how: Method
    chosen: dict[str, str]
    refinement: dict | None = None
    elbo_rows: tuple[int, int] | None = None
    log_joint: Callable | None = None


class Method:
    """A `--method`: how it chooses families, which options it takes, how it fits, and how it
    describes its fits. Subclasses (one module each in ppl.methods) override what differs."""

    #: --method NAME; `fitted_as`: the name a fit by it carries (fit.json's "method").
    name: str = ""
    fitted_as: str = ""
    families: FamilyPolicy = FamilyPolicy()
    takes_binary = False  # binary latents (score-function gradients)
    takes_hyper = False  # hyperparameters, fitted as point estimates
    takes_batch = False  # --batch: data subsampling
    own_options: tuple[str, ...] = ()  # options of this method only (FitOptions' names)

    def rows_elsewhere(self, *, batch, optimizer, refine_draws) -> bool:
        """Whether a fit with these options can read its rows elsewhere (--stream, Dask)."""
        return False

    def check_model(self, model) -> None:
        """Refuse a model this method cannot fit (before the options are checked)."""

    def check_options(self, model, options: FitOptions) -> None:
        """Refuse options this method cannot take (the last of the checks)."""

    def prepare(self, model, options: FitOptions):
        """The model the method fits (its log joint possibly replaced)."""
        return model

    def fit(self, model, chosen: dict[str, str], init: np.ndarray, rng: np.random.Generator,
            options: FitOptions) -> Fitted:  # fmt: skip
        raise NotImplementedError

    def finish(self, result, fitted: Fitted, log_joint, rng, options: FitOptions,
               refit: Callable):  # fmt: skip
        """The result after the method's own afterthoughts (auto's richer families); `refit`
        is ppl.pipeline.fit, for a method that tries another."""
        return result

    # -- how a fit by this method describes itself (ppl.outputs.report) ----------------------

    def method_text(self, result, rows: str) -> str:
        """How q was made, in one phrase."""
        return f"{result.method} ADVI, eta {result.vi.eta:g}"

    def ended_by(self, result, met: bool, iterations: int) -> str:
        """What stopped the fit, as it happened."""
        polish = result.refinement or {}
        if polish.get("used") and polish.get("stochastic_converged") is False:
            reached = "reached" if met else "did not reach"
            return (f"the iteration cap (--iter {iterations}); the deterministic polish then "
                    f"{reached} the fixed-draw optimum")  # fmt: skip
        if met and getattr(result.vi, "stopped_by", "") == "optimum":
            return ("the optimum: the iterates stationary and two successive averages of q "
                    "within their noise")  # fmt: skip
        return ("the stopping rule (relative ELBO change < --tol-rel-obj)" if met
                else f"the iteration cap (--iter {iterations})")  # fmt: skip

    def rows_text(self, result, *, batch, stream, partitions, chunk_rows) -> str:
        """Where the rows were when not in memory (the default road's passes over a --stream
        file's chunks or Dask partitions), for method_text."""
        passes = getattr(result.model.log_joint, "passes", 0)
        if stream is not None:
            return (f"; every one of {stream.rows} rows, read in {len(stream.chunks)} chunks of "
                    f"up to {chunk_rows} rows at each of {passes} passes")  # fmt: skip
        if partitions is not None:
            workers = len(partitions.client.scheduler_info()["workers"])
            return (f"; every one of {partitions.rows} rows in {len(partitions.files)} files, "
                    f"summed on {workers} Dask worker{'s' if workers != 1 else ''} in {passes} "
                    "passes")  # fmt: skip
        return ""

    def variational_parameters(self, result) -> dict:
        """Per latent, q's parameters on the unconstrained scale (a Gaussian's means and sds)."""
        vi = result.vi
        sd = vi.sd
        out = {}
        for lat in result.model.latents:
            part = slice(lat.offset, lat.offset + lat.size)
            out[lat.name] = {"family": self.gaussian_name(vi), "mean": vi.mean[part].tolist(),
                             "sd": sd[part].tolist()}  # fmt: skip
        return out

    def exact_summaries(self, result, weighted: bool = False):
        """Summaries q gives without its draws (ppl.inference.collapse_summary.Exact, aligned
        with the draws' scalars), or None: the draws' own."""
        return None

    def exact_scalars(self, result) -> list[str]:
        """The element names whose summaries are exact (not from draws): the verdict does not
        judge their draws' tails (ppl.diagnostics.mcse_tail)."""
        from ppl.diagnostics.mcse_tail import element_names

        exact = self.exact_summaries(result)
        if exact is None:
            return []
        names = [n for name, arr in result.draws.items()
                 for n in element_names(name, np.shape(arr)[1:])]  # fmt: skip
        return [n for n, e in zip(names, exact.exact, strict=True) if e]

    def gaussian_name(self, vi) -> str:
        """The family fit.json names for a Gaussian q."""
        return GAUSSIAN


class CompositeMethod(Method):
    """A method whose q is a composite family (ppl.families.composite): its parameters are the
    blocks' own."""

    def variational_parameters(self, result) -> dict:
        return result.vi.family.describe(result.vi.theta)

    def exact_summaries(self, result, weighted: bool = False):
        """A latent whose block has closed-form summaries (a gamma q on x itself), scalar or
        vector, unweighted: its mean, sd and quantiles from q's parameters, where its draws
        agree with them (their mean within 5 MCSE: the block is the latent, untransformed)."""
        if weighted or not hasattr(result.vi, "family") or not hasattr(result.vi, "theta"):
            return None
        return closed_form(result)


def fixed_draw_ending(met: bool) -> str:
    """What ended a fit by the deterministic road (L-BFGS on a fixed-draw ELBO)."""
    return ("the fixed-draw optimum, reached by L-BFGS, settled as the draws grew" if met
            else "the fixed-draw optimum did not settle (see warnings)")  # fmt: skip


def closed_form(result):
    """ppl.inference.collapse_summary.Exact from the blocks' closed_summaries, or None."""
    from ppl.inference.collapse_summary import PROBS, Exact

    split = getattr(result.vi.family, "_split", None)  # a composite family's blocks
    if split is None:
        return None
    blocks = {b.name: (fam, part) for b, fam, part in split(np.asarray(result.vi.theta))}
    columns = []
    for name, arr in result.draws.items():
        arr = np.asarray(arr, dtype=float) if np.asarray(arr).dtype.kind == "f" else None
        size = int(np.prod(np.shape(result.draws[name])[1:], dtype=int))
        fam, part = blocks.get(name, (None, None))
        own = getattr(fam, "closed_summaries", None)
        if own is None or arr is None or arr.ndim > 2 or size != getattr(fam, "dim", -1):
            columns.append((np.zeros(size, dtype=bool), *(np.zeros(size),) * 3,
                            np.zeros((len(PROBS), size))))  # fmt: skip
            continue
        mean, sd, quantiles = own(part, PROBS)
        draws = arr.reshape(len(arr), -1)
        agree = np.abs(draws.mean(axis=0) - mean) <= 5 * sd / np.sqrt(len(arr)) + 1e-12
        columns.append((agree, mean, np.zeros(size), sd, quantiles))
    if not columns or not any(c[0].any() for c in columns):
        return None
    exact, mean, mcse, sd = (np.concatenate([c[i] for c in columns]) for i in range(4))
    quantiles = np.concatenate([c[4] for c in columns], axis=1)
    return Exact(
        exact, mean, mcse, sd, quantiles, grid=False, how="q's own (closed form), exact given q"
    )
