"""Stochastic VI with local and global latents (Hoffman et al. 2013; Shah, Knowles & Ghahramani
2015, "Gibbs-SSVI"): a Gibbs local step, then a natural-gradient step on the global q.

Split, from the graph IR (as ppl.inference.subsample does): *local* latents have the data's rows
as leading dimension; the rest are global. The sweep (ppl.inference.gibbs) draws every binary
latent, the continuous latent each one switches (its partner: the slab of ``z .* w``) and every
continuous local latent; q is a mean-field Gaussian over the remaining global coordinates (on the
unconstrained scale).

Why this q is fitted by these gradients: with q(beta) q(psi | beta) and q(psi | beta) the exact
conditional p(psi | beta, y), the ELBO is E_q(beta)[log p(y, beta) - log q(beta)], and by Fisher's
identity grad_beta log p(y, beta) = E_{p(psi | beta, y)}[grad_beta log p(y, psi, beta)]. So the
pathwise gradient of the log joint at a draw beta of q and at Gibbs draws psi given beta is an
unbiased estimate (biased only by an unconverged chain: the paper's burn-in of 3 sweeps, then 3
samples, warm-started from each row's last state). With a minibatch of B of N rows, the per-row
statements are weighted N / B.

The step is the natural gradient of a Gaussian q (the "variational online Newton" form):
precision <- (1 - rho) precision + rho (-E d2 log p), mean <- mean + rho grad / precision, with
rho_t = (t + tau)^-kappa. For a conditionally conjugate model it is Hoffman et al.'s update of the
natural parameters, the one the paper uses. The diagonal of the Hessian is estimated by a secant
along a random +-1 direction at fixed local draws (the complete conditional's precision, as in
SVI), minus the variance of the gradient over the local draws (Louis's identity: the marginal
curvature of log p(y, beta) is the complete-data one less that variance; without it q(beta) is as
narrow as if the local draws were known -- on an 8-point mixture, indicators 0.1 too sure). The
variance of 3 draws is noisy, so it may lower a coordinate's curvature at most 4 times (a
correction without that bound let one noisy step widen q(log sigma) of spike-and-slab
regression until every slab was switched off).

The local step is exact given beta, so no local variational parameters need tuning.
``gibbs_step=False`` (the paper's MF-SSVI) instead sets a Bernoulli q(z) per local binary to the
expit of its conditional log-odds at the other coordinates' means (one coordinate-ascent pass on
the local ELBO per sweep) and draws z from it.

Costs and limits: a sweep is K batch evaluations for K local binaries per row (rows in parallel,
coordinates not), unless the incremental form applies (ppl.inference.gibbs_quadratic: K + 3
gradients and K + 1 values per batch, then O(B K^2) arithmetic per sweep); a model whose local
latents are coupled across rows is refused.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace

import autograd.numpy as anp
import numpy as np
from autograd import grad
from autograd.core import make_vjp
from scipy.special import expit

from ppl.errors import ModelError
from ppl.families.registry import GAUSSIAN
from ppl.inference import gibbs, local_rows
from ppl.inference.stopping import OptimumRule
from ppl.ir.graph import build_graph
from ppl.runtime.signals import Devectorise

#: What a local latent's entry in fit.json (describe) holds.
LOCAL_TEXT = ("per-row means of the Gibbs draws given q's mean globals, from a final pass over "
              "every row (ppl.inference.local_rows)")  # fmt: skip
WINDOW = 50  # iterations per stopping-rule window
#: Draws swept in parallel at once (parallel_draws), and the most sweeps a draw gets.
DRAW_BLOCK, MAX_DRAW_SWEEPS = 1000, 100
#: A draw has forgotten its start when no binary coordinate correlates with its starting value
#: across the chains beyond this (the noise of a correlation from 1000 chains: 0.03).
FORGOTTEN = 0.1
#: States (S x D values) up to this size are copied to take all their gradients in one call.
COPY_ELEMENTS = 2_000_000


def step_size(t: int, tau: float, kappa: float) -> float:
    """The Robbins-Monro schedule rho_t = (t + tau)^-kappa (t from 1)."""
    return float((t + tau) ** -kappa)


class AllRows:
    """The full data as the one batch (no --batch): Batches' interface, N = B."""

    def __init__(self, model, rows_name: str | None, local: set[str]):
        self.model = self.batch_model = model
        self.rows_name, self.local = rows_name, local
        self.N = self.B = int(model.data[rows_name]) if rows_name else 0
        self.columns = np.arange(model.dim)

    def draw_rows(self) -> np.ndarray:
        return np.arange(self.N)

    def set_rows(self, rows: np.ndarray) -> None:
        pass

    def row_keys(self) -> set[int]:
        return set()


def rows_of(model, batch: int | None, rng: np.random.Generator):
    """Batches (ppl.inference.subsample) for a batch of rows, else AllRows."""
    graph = build_graph(model.checked, model)
    firsts = Counter(n.dims[0] for n in graph.of_kind("data") if n.dims)
    rows_name = firsts.most_common(1)[0][0] if firsts else None
    if rows_name is not None and np.ndim(model.data.get(rows_name, [])) != 0:
        rows_name = None
    local = (
        {n.name for n in graph.of_kind("latent") if n.dims and n.dims[0] == rows_name}
        if rows_name
        else set()
    )
    if batch and rows_name and batch < int(model.data[rows_name]):
        from ppl.inference.subsample import Batches

        return Batches(model, batch, rng)
    return AllRows(model, rows_name, local)


def scaled_log_joint(model, zeta, scales: dict[int, float]):
    """The log joint (binary latents at their 0/1 values), each statement whose id is in
    `scales` weighted by it; differentiable in zeta."""
    S = zeta.shape[0]
    extra: list = []

    def record(statement, lp):
        weight = scales.get(id(statement))
        if weight is not None:
            extra.append((weight - 1.0) * lp)

    while True:
        extra.clear()
        try:
            _, target, log_jac = model._evaluate(zeta, on_statement=record, binary=True)
        except Devectorise as d:
            model.devectorised.add(d.loop)
            continue
        total = target + log_jac + anp.zeros(S)
        for lp in extra:
            total = total + lp
        return total


def _runs(mask: np.ndarray) -> list[tuple[bool, int, int]]:
    """Runs of equal values of a boolean mask: (value, start, stop)."""
    edges = np.flatnonzero(np.diff(mask.astype(int))) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [len(mask)]])
    return [(bool(mask[a]), int(a), int(b)) for a, b in zip(starts, stops, strict=True)]


@dataclass
class SVIResult:
    """q over the global coordinates (mean, precision) and the Gibbs states."""

    model: object
    q_columns: np.ndarray  # full-model coordinates under the Gaussian q
    mean: np.ndarray
    precision: np.ndarray
    state: np.ndarray  # (chains, D) the last Gibbs state (locals: each row's last visit)
    inclusion: dict[str, np.ndarray]  # binary latent -> averaged P(z = 1) (Rao-Blackwellised)
    elbo_trace: list[tuple[int, float]]
    iterations: int
    converged: bool
    seconds: float
    gibbs: bool  # the local step: Gibbs sweeps, else MF-SSVI's Bernoulli q
    batch: int | None
    burnin: int
    samples: int
    kappa: float
    tau: float
    evaluations: int = 0
    grad_evals: int = 0
    warnings: list[str] = field(default_factory=list)
    elbo: float = float("nan")
    eta: float = float("nan")
    grad_samples: int = 1
    polish: dict = field(default_factory=dict)
    fitter: object = None  # the LocalGlobal that made it: more sweeps for draws
    tol_rel_obj: float | None = None  # the relative rule's tolerance; None: the optimum rule
    #: per-row means of the local latents from the final pass over every row (ppl.inference.
    #: local_rows): {latent: (N, per row), "z .* w": E[z * w] of a binary latent and its slab}
    local_means: dict = field(default_factory=dict)
    summarised: bool = False  # the output keeps local_means, not draws, of the local latents
    final_seconds: float = 0.0  # the final pass's share of `seconds`
    implicit_q = True  # the Gibbs part has no density: the verdict does not use k-hat

    @property
    def sd(self) -> np.ndarray:
        return 1.0 / np.sqrt(self.precision)

    def draw_groups(self, n: int) -> np.ndarray:
        """The chain of each of n draws of `sample` (its Gibbs part's start or chain): the
        verdict's batch means of the draws' Monte Carlo error follow it."""
        return np.arange(n) % self.state.shape[0]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, D): globals from q; the Gibbs part from the chains, one more sweep per draw over
        every row (LocalGlobal.draws)."""
        return self.fitter.draws(self, rng, n)

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        """log q of the global coordinates plus, for the binary ones, log of the averaged
        inclusion probabilities (independent Bernoullis): a stand-in for the implicit q(psi |
        beta), so PSIS compares the Gaussian part only roughly."""
        z = (zeta[:, self.q_columns] - self.mean) * np.sqrt(self.precision)
        out = np.sum(-0.5 * z * z + 0.5 * np.log(self.precision / (2 * np.pi)), axis=1)
        for lat in self.model.latents:
            if lat.binary and lat.name in self.inclusion:
                p = np.clip(self.inclusion[lat.name], 1e-12, 1 - 1e-12)
                x = zeta[:, lat.offset : lat.offset + lat.size]
                out = out + np.sum(x * np.log(p) + (1 - x) * np.log1p(-p), axis=1)
        return out

    def describe(self) -> dict[str, dict]:
        out = {}
        for lat in self.model.latents:
            if lat.name in self.local_means:
                out[lat.name] = {"family": "gibbs", "local": LOCAL_TEXT,
                                 "shape": list(self.local_means[lat.name].shape)}  # fmt: skip
                if not self.summarised and lat.binary:
                    out[lat.name]["p"] = self.local_means[lat.name].ravel().tolist()
            elif lat.binary:
                p = self.inclusion.get(lat.name)
                if p is None:  # local without a final pass: the last states
                    p = self.state[:, lat.offset : lat.offset + lat.size].mean(axis=0)
                out[lat.name] = {"family": "gibbs", "p": np.asarray(p).tolist()}
        at = {int(c): i for i, c in enumerate(self.q_columns)}
        for lat in self.model.latents:
            cols = [at.get(c) for c in range(lat.offset, lat.offset + lat.size)]
            if lat.size and all(c is not None for c in cols):
                out[lat.name] = {"family": GAUSSIAN, "mean": self.mean[cols].tolist(),
                                 "sd": self.sd[cols].tolist()}  # fmt: skip
            elif not lat.binary and lat.size and lat.name not in out:
                out[lat.name] = {"family": "gibbs"}
        return out


class LocalGlobal:
    """One fit: the rows, the sweep's plan on the batch model, q's columns."""

    def __init__(self, model, rows, chains: int, rng: np.random.Generator, gibbs_step: bool):
        self.model, self.rows, self.gibbs_step = model, rows, gibbs_step
        bm = rows.batch_model
        self.plan = gibbs.plan_gibbs(bm, rows.local, rows.B)
        self.chains = 1 if self.plan.local else chains
        drawn = np.zeros(bm.dim, dtype=bool)
        drawn[self.plan.columns] = True
        self.q_batch = np.flatnonzero(~drawn)  # batch-model coordinates under q
        self.q_runs = _runs(~drawn)
        local_names = rows.local
        for lat in bm.latents:
            if lat.name in local_names and not drawn[lat.offset : lat.offset + lat.size].all():
                raise ModelError(f"local latent '{lat.name}' is neither binary nor drawn by Gibbs")
        self.weight = weight = rows.N / rows.B if rows.B else 1.0
        self.scales = dict.fromkeys(rows.row_keys(), weight)
        self.rng = rng
        self.fast: list = []  # ppl.inference.gibbs_quadratic.QuadraticPairs, when they apply
        self.fast_chains: list = []  # ppl.inference.gibbs_chains.ChainPairs, when they apply
        self.global_units: list = []  # global binary units, in the order of their probs

    def q_full(self) -> np.ndarray:
        """The full model's coordinates of q (global: the same under every batch)."""
        self.rows.set_rows(self.rows.draw_rows())
        return self.rows.columns[self.q_batch]

    def setup(self, state: np.ndarray) -> None:
        """Map the rows and check the conditionals are Gaussian where the sweep needs them."""
        rows = self.rows
        rows.set_rows(rows.draw_rows())
        x = state[0, rows.columns].astype(float)
        gibbs.map_rows(self.plan, x, self.rng)
        bad = gibbs.check_quadratic(self.plan, x[None])
        if bad:
            paired = gibbs.plan_gibbs(rows.batch_model, rows.local, rows.B, pair=False)
            if set(paired.columns) != set(self.plan.columns):
                raise gibbs.GibbsStructureError(
                    f"the conditional of the latent(s) switched by {', '.join(bad)} is not "
                    "Gaussian; the Gibbs road needs it to be (binary latents alone are fine)"
                )
            paired.row_map, paired.sampled, paired.sizes = (
                self.plan.row_map, self.plan.sampled, self.plan.sizes)  # fmt: skip
            self.plan = paired
        self.try_incremental(x[None])
        self.try_chain_pairs(state[:, rows.columns].astype(float))
        self.global_units = [u for u in self.plan.globals_ if u.binary is not None] + [
            u for pairs in self.fast_chains for u in pairs.units]  # fmt: skip

    def coefficient_gradients(self) -> int:
        """Gradients the incremental pairs' coefficients took (each a point of the model)."""
        return sum(p.gradient_points for p in self.fast + self.fast_chains)

    @property
    def draws_any(self) -> bool:
        """Whether a sweep draws anything (the plan's units or the incremental pairs)."""
        return bool(self.plan.columns.size or self.fast or self.fast_chains)

    def try_chain_pairs(self, X: np.ndarray) -> None:
        """Take the incremental pair updates of ppl.inference.gibbs_chains for the global pairs
        when every global unit is a pair of one binary latent and nothing is local (a local
        latent or another global unit would move the pairs' quadratic form during a sweep), and
        when they agree with the exact ones in every chain at X."""
        from ppl.inference.gibbs_chains import ChainPairs

        plan = self.plan
        units = plan.globals_
        if not self.gibbs_step:  # MF-SSVI keeps refusing global slabs (meanfield_sweep says so)
            return
        if plan.local or self.fast or not units or len({u.name for u in units}) != 1:
            return
        if any(u.binary is None or u.cont is None for u in units):
            return
        bm = self.rows.batch_model

        def values(Y):
            return gibbs._energies(plan, Y, False)[:, 0]

        pairs = ChainPairs(plan, list(units), lambda Y: scaled_log_joint(bm, Y, {}), values)
        with np.errstate(all="ignore"):
            pairs.prepare(X)
            K = pairs.K
            ok = pairs.usable() and pairs.agrees(X, sorted({0, K // 2, K - 1}), self.rng)
        if ok:
            self.fast_chains = [pairs]
            plan.globals_ = []

    def try_incremental(self, X: np.ndarray) -> None:
        """Take the incremental pair updates (ppl.inference.gibbs_quadratic) for a local binary
        latent and its slab when they agree with the exact ones at X, and when nothing else is
        local (another local latent could move the pair's quadratic form)."""
        from ppl.inference.gibbs_quadratic import QuadraticPairs

        plan = self.plan
        names = {u.name for u in plan.local}
        if len(names) != 1 or any(u.binary is None or u.cont is None for u in plan.local):
            return
        bm = self.rows.batch_model
        pairs = QuadraticPairs(plan, list(plan.local), lambda Y: scaled_log_joint(bm, Y, {}))
        with np.errstate(all="ignore"):
            pairs.prepare(X[0])
            K = pairs.K
            ok = np.all(pairs.p > 0) and pairs.agrees(X, sorted({0, K // 2, K - 1}), self.rng)
        if ok:
            self.fast = [pairs]
            plan.local = []

    def sweeps(self, X: np.ndarray, n: int, rng: np.random.Generator):
        """n Gibbs sweeps on X in place, yielding the conditional P(z = 1) of the binary
        coordinates after each: the incremental pairs first, then the plan's units."""
        gens = []
        for pairs in self.fast:
            pairs.prepare(X[0])
            gens.append(pairs.sweeps(X, n, rng))
        last, exact = [], []
        for pairs in self.fast_chains:
            pairs.prepare(X)
            if pairs.usable():
                last.append(pairs.sweeps(X, n, rng))
            else:  # a chain's globals where a slab is no proper Gaussian: the six-point update
                exact += pairs.units
        for _ in range(n):
            probs = [next(g) for g in gens]
            probs.append(gibbs.sweep(self.plan, X, rng))
            if exact:  # (the chain pairs are the only global units, so their probs come last)
                probs.append(gibbs.sweep(replace(self.plan, local=[], globals_=exact), X, rng))
            probs += [next(g) for g in last]
            yield np.concatenate(probs, axis=1)

    def assemble(self, X: np.ndarray, v):
        """X with its q columns replaced by v (S, nq), differentiable in v."""
        parts, k = [], 0
        for is_q, a, b in self.q_runs:
            if is_q:
                parts.append(v[:, k : k + b - a])
                k += b - a
            else:
                parts.append(X[:, a:b])
        return anp.concatenate(parts, axis=1)

    def gradient(self, X: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(S, nq) the gradient of the (scaled) log joint in q's coordinates at X, v."""
        bm = self.rows.batch_model
        return grad(lambda w: anp.sum(scaled_log_joint(bm, self.assemble(X, w), self.scales)))(v)

    def values_gradients(self, X: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (scaled) log joint (n,) and its gradient (n, nq) in q's coordinates at the n
        states X, v in one call (the rows are separate points)."""
        bm = self.rows.batch_model
        vjp, values = make_vjp(lambda w: scaled_log_joint(bm, self.assemble(X, w), self.scales), v)
        return np.asarray(values), vjp(np.ones(len(X)))

    def global_signal(self, X: np.ndarray, kept: list, v: np.ndarray, sd: np.ndarray, rng):
        """From the kept local states at q's draws v (X the last): the mean gradient of the
        (scaled) log joint in q's coordinates, its curvature and the log joint's mean at the
        last state; the gradient at each kept state, and at the last one moved along a random
        +-1 direction r (the curvature's secant). `kept`: the states (S, D), all done in one
        model call, or (values, gradients) already taken at each (states too big to copy)."""
        count, S = len(kept), v.shape[0]
        r = rng.choice([-1.0, 1.0], size=v.shape[1])
        delta = 1e-2 * sd
        with np.errstate(all="ignore"):
            if isinstance(kept[0], tuple):
                last = self.values_gradients(X, v + delta * r)
                values, g = (np.concatenate(a) for a in zip(*kept, last, strict=True))
            else:
                values, g = self.values_gradients(
                    np.concatenate(kept + [X]), np.concatenate([v] * count + [v + delta * r])
                )
        g_all = g[: count * S].reshape(count, S, -1)
        lp = float(np.mean(values[(count - 1) * S : count * S]))
        # Louis's identity: the marginal curvature is the complete-data one minus the variance
        # of the complete-data gradient over the local draws (within each chain: across chains
        # beta differs too)
        spread = np.var(g_all, axis=0, ddof=1).mean(axis=0) if count > 1 else 0.0
        spread = spread / self.weight  # (N/B)^2 sum over the batch -> N/B times it
        g2 = g[count * S :].sum(axis=0)
        g1 = g_all[-1].sum(axis=0)  # at the last kept state
        complete = -((g2 - g1) * r / delta) / S
        # the variance from 3 draws is noisy: it may take the curvature down at most 4 times
        curvature = np.maximum(complete - spread, complete / 4)
        return g_all.mean(axis=(0, 1)), curvature, lp

    def local_step(self, X: np.ndarray, burnin: int, samples: int, rng):
        """Sweeps on X in place; yields after each of the last `samples` sweeps (the probs)."""
        if not self.gibbs_step:
            gens = []
            for pairs in self.fast:  # spike-and-slab pairs: q(z) q(w) in closed form
                pairs.prepare(X[0])
                gens.append(pairs.meanfield_sweeps(X, burnin + samples, rng))
            for k in range(burnin + samples):
                probs = [next(g) for g in gens]
                if self.plan.local or self.plan.globals_:
                    probs.append(meanfield_sweep(self.plan, X, rng, self))
                if k >= burnin:
                    yield np.concatenate(probs, axis=1)
            return
        for k, p in enumerate(self.sweeps(X, burnin + samples, rng)):
            if k >= burnin:
                yield p

    def draws(self, result: SVIResult, rng: np.random.Generator, n: int) -> np.ndarray:
        """n draws of the full vector (SVIResult.sample): the globals from q, the Gibbs part
        by sweeps given them. Without local latents every draw is its own chain, all in
        parallel (parallel_draws); with them, draw j's globals from q and one more sweep of
        every row given them, B rows at a time (ppl.inference.local_rows)."""
        S = result.state.shape[0]
        if isinstance(self.rows, AllRows) and self.draws_any and not self.plan.rows:
            return np.concatenate([self.parallel_draws(result, rng, min(DRAW_BLOCK, n - a))
                                   for a in range(0, n, DRAW_BLOCK)])  # fmt: skip
        if result.local_means:  # every row swept given each draw's globals
            return local_rows.local_draws(self, result, rng, n)
        out = np.zeros((n, self.model.dim))
        full = isinstance(self.rows, AllRows)
        for j in range(n):
            chain = j % S
            x = result.state[chain].astype(float)
            x[result.q_columns] = result.mean + rng.standard_normal(len(result.mean)) * result.sd
            if full and self.draws_any:
                X = x[None].copy()
                next(self.sweeps(X, 1, rng))
                result.state[chain] = X[0]
                x = X[0]
            out[j] = x
        return out

    def parallel_draws(self, result: SVIResult, rng: np.random.Generator, n: int) -> np.ndarray:
        """n independent draws: chain j starts at the fit's chain j % S with its own globals
        from q, and all are swept in parallel until no binary coordinate still remembers its
        start (its correlation across the n chains with its starting value under
        FORGOTTEN, at least burnin + samples sweeps, at most MAX_DRAW_SWEEPS). Draws that
        continued one chain (a sweep each) were as correlated as its sweeps: on Boston's
        spike-and-slab the indicator of rad keeps 0.86 of its value from one sweep to the next
        (rad and tax are correlated 0.91 and one pair moves at a time), so 1000 draws of 8
        chains put its inclusion 0.12 off."""
        S = result.state.shape[0]
        X = result.state[np.arange(n) % S].astype(float)
        X[:, result.q_columns] = (
            result.mean + rng.standard_normal((n, len(result.mean))) * result.sd
        )
        binary = np.concatenate(
            [self.plan.binary_columns] + [p.zc.ravel() for p in self.fast + self.fast_chains]
        )
        start = X[:, binary].copy()
        least = result.burnin + result.samples
        for t, _ in enumerate(self.sweeps(X, MAX_DRAW_SWEEPS, rng), start=1):
            if t >= least and _remembered(start, X[:, binary]) < FORGOTTEN:
                break
        result.state[: min(n, S)] = X[:S]
        return X


def _remembered(start: np.ndarray, now: np.ndarray) -> float:
    """The largest |correlation| across chains of a column's current value with its start
    (columns constant in either: 0)."""
    a, b = start - start.mean(axis=0), now - now.mean(axis=0)
    norm = np.sqrt(np.sum(a * a, axis=0) * np.sum(b * b, axis=0))
    with np.errstate(all="ignore"):
        corr = np.where(norm > 0, np.sum(a * b, axis=0) / norm, 0.0)
    return float(np.max(np.abs(corr))) if corr.size else 0.0


def meanfield_sweep(plan: gibbs.GibbsPlan, X: np.ndarray, rng, fitter) -> np.ndarray:
    """The paper's MF-SSVI local step: q(z) = Bernoulli(p) per binary coordinate, each p set to
    expit of the conditional log-odds evaluated at the other coordinates' means (one pass of
    coordinate ascent on the local ELBO), then z drawn from q. Without partners only: a slab
    would need its own Gaussian q."""
    means = fitter.mf_means
    S = X.shape[0]
    probs = []
    for i, u in enumerate(plan.local + plan.globals_):
        if u.binary is None or u.cont is not None:
            raise ModelError("the mean-field local step takes binary latents without a slab only")
        E = np.repeat(means[:, None, :], 2, axis=1)
        E[:, 0, u.binary], E[:, 1, u.binary] = 0.0, 1.0
        en = gibbs._energies(plan, E.reshape(2 * S, -1), i < len(plan.local)).reshape(S, 2, -1)
        with np.errstate(invalid="ignore"):
            p = expit(en[:, 1] - en[:, 0])
        means[:, u.binary] = p
        X[:, u.binary] = (rng.uniform(size=p.shape) < p).astype(float)
        probs.append(p)
    return np.concatenate(probs, axis=1)


def fit_local_global(
    model,
    init: np.ndarray,
    rng: np.random.Generator,
    *,
    gibbs_step: bool = True,
    batch: int | None = None,
    burnin: int = 3,
    samples: int = 3,
    kappa: float = 0.75,
    tau: float = 1.0,
    chains: int = 8,
    max_iter: int = 10000,
    min_iter: int = 200,
    tol_rel_obj: float | None = None,
    progress=None,
) -> SVIResult:
    """Gibbs-SSVI (`gibbs_step`) or MF-SSVI: module docstring. It ends at the optimum rule of
    the other stochastic fits (ppl.inference.stopping.OptimumRule: stationary iterates of q's
    mean and log sd, their phase averages agreeing within their noise; each phase halves rho),
    or with `tol_rel_obj` at Stan-style relative change of the windowed log joint."""
    start = time.perf_counter()
    rows = rows_of(model, batch, rng)
    fitter = LocalGlobal(model, rows, chains, rng, gibbs_step)
    S = fitter.chains
    state = _initial_state(model, init, S, rng, rows.local)
    fitter.setup(state)
    q_cols = fitter.q_full()
    mean = np.asarray(init, dtype=float)[q_cols]
    precision = np.ones(len(q_cols))
    trace, window, history, probs_hist = [], [], [], []
    converged = False
    rule = OptimumRule(2 * len(mean)) if tol_rel_obj is None else None
    shrink = 1.0  # rho's factor: halved at each of the optimum rule's phases
    t = 0
    for t in range(1, max_iter + 1):
        rows.set_rows(rows.draw_rows())
        cols = rows.columns
        X = state[:, cols].astype(float)
        sd = 1 / np.sqrt(precision)
        v = mean + rng.standard_normal((S, len(mean))) * sd
        X[:, fitter.q_batch] = v
        if not gibbs_step:
            fitter.mf_means = X.copy()
        kept, p_sum, count = [], 0.0, 0
        for p in fitter.local_step(X, burnin, samples, rng):
            # the states, for one model call after the sweeps, unless too big to copy
            kept.append(X.copy() if X.size <= COPY_ELEMENTS else fitter.values_gradients(X, v))
            p_sum = p_sum + p.mean(axis=0)
            count += 1
        g_mean, curvature, lp = fitter.global_signal(X, kept, v, sd, rng)
        state[:, cols] = X
        rho = shrink * step_size(t, tau, kappa)
        precision = (1 - rho) * precision + rho * np.maximum(curvature, 1e-3)
        step = rho * g_mean / precision
        limit = 3.0 / np.sqrt(precision)
        mean = mean + np.clip(step, -limit, limit)
        if not np.all(np.isfinite(mean)):
            raise ModelError("Gibbs-SSVI: the global q's mean is no longer finite")
        if rule is not None:
            rule.observe(_view(mean, precision), t, _moments)
        probs_hist.append(np.asarray(p_sum) / max(count, 1))
        window.append(lp)
        if progress is not None:
            progress(t, None)
        if t % WINDOW == 0:
            history.append(float(np.mean(window)))
            trace.append((t, history[-1]))
            window = []
            if t >= min_iter:
                said = _stop(rule, tol_rel_obj, history, mean, precision, t)
                if said == "decrease":
                    shrink /= 2
                elif said == "converged":
                    if rule is not None:
                        mean, precision = _unview(rule.average)
                    converged = True
                    break
    inclusion = _inclusion(fitter, np.array(probs_hist))
    result = SVIResult(
        model, q_cols, mean, precision, state, inclusion, trace, t, converged,
        time.perf_counter() - start, gibbs_step, batch, burnin, samples, kappa, tau,
        evaluations=fitter.plan.evaluations, fitter=fitter,
        grad_evals=t * (samples + 1) * S + fitter.coefficient_gradients(),
        tol_rel_obj=tol_rel_obj,
    )  # fmt: skip
    began = time.perf_counter()
    result.local_means = local_rows.final_pass(fitter, result, rng)
    result.final_seconds = time.perf_counter() - began
    result.seconds += result.final_seconds
    result.elbo = _elbo(result, rows, history[-1] if history else float(np.mean(window)), rng)
    return result


def _initial_state(
    model, init: np.ndarray, S: int, rng: np.random.Generator, local: set[str] = frozenset()
) -> np.ndarray:
    """(S, D) chains at `init` (float32 for huge models), each global binary coordinate a fair
    coin and each local one 0, as the BPFA reference starts its Z: a row's sweeps then switch on
    what its data ask for. From coins, BPFA at 128 x 128 (K = 64, globals from uniform(-2, 2):
    pi near 0.5, Phi 8 times its prior scale) kept 50 of 64 atoms on per patch, fitting each
    patch's 13 observed pixels exactly and its hidden ones at 8 dB; from 0: 10 atoms a patch."""
    dtype = np.float32 if model.dim > 5_000_000 else float
    state = np.repeat(np.asarray(init, dtype=float)[None], S, axis=0).astype(dtype)
    for lat in model.latents:
        if lat.binary and lat.name in local:
            state[:, lat.offset : lat.offset + lat.size] = 0.0
        elif lat.binary:
            cols = slice(lat.offset, lat.offset + lat.size)
            state[:, cols] = rng.uniform(size=(S, lat.size)) < 0.5
    return state


def _stop(rule, tol_rel_obj, history: list, mean, precision, t: int) -> str | None:
    """At a window's end: the optimum rule's word (None, "decrease", "converged"), or with
    `tol_rel_obj` "converged" when the windowed log joint's last two relative changes are
    under it."""
    if rule is not None:
        return rule.decide(_view(mean, precision), t, _moments)
    if len(history) < 3:
        return None
    changes = [abs(history[-i] - history[-i - 1]) / max(abs(history[-i]), 1e-12) for i in (1, 2)]
    return "converged" if max(changes) < tol_rel_obj else None


def _view(mean: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """q's global Gaussian as one vector for the optimum rule: the means, then the log sds."""
    return np.concatenate([mean, -0.5 * np.log(precision)])


def _unview(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(theta) // 2
    return theta[:n], np.exp(-2.0 * theta[n:])


def _moments(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(theta) // 2
    return theta[:n], np.exp(theta[n:])


def _elbo(result: SVIResult, rows, windowed: float, rng: np.random.Generator) -> float:
    """On all rows: the mean of log p - log q over 100 draws (log q the stand-in of
    SVIResult.log_q). Under --batch: the last window's mean (N / B-scaled) log joint at the Gibbs
    states plus q's Gaussian entropy, a cheap figure that leaves out the local part's entropy."""
    local = sum(x.size for x in result.local_means.values())
    if isinstance(rows, AllRows) and local * 100 <= local_rows.LOCAL_DRAW_VALUES:
        zeta = result.sample(rng, 100)
        with np.errstate(all="ignore"):
            values = result.model.log_joint(zeta, binary=True) - result.log_q(zeta)
        if np.all(np.isfinite(values)):
            return float(np.mean(values))
    entropy = np.sum(0.5 * np.log(2 * np.pi * np.e / result.precision))
    return float(windowed + entropy)


def _inclusion(fitter: LocalGlobal, probs: np.ndarray) -> dict[str, np.ndarray]:
    """Per global binary latent: the conditional P(z = 1) averaged over the last half of the
    iterations (the first half is the chain's and q's burn-in)."""
    if not len(probs) or not probs.shape[1]:
        return {}
    kept = probs[len(probs) // 2 :].mean(axis=0)
    out: dict[str, list] = {}
    k = probs.shape[1] - len(fitter.global_units)  # theirs are the last columns
    for u in fitter.global_units:
        out.setdefault(u.name, []).append(float(kept[k]))
        k += 1
    return {name: np.array(v) for name, v in out.items()}
