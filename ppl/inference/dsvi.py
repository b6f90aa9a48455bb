"""DSVI (Titsias & Lázaro-Gredilla 2014): q(theta) = law of C z + mu, z from a standard density.

Algorithm 1: draw z ~ phi, theta = C z + mu, and step mu along grad log g(theta) and C along
tril(grad log g(theta) z^T) + diag(1 / C_dd) (eq. 9 for a diagonal C). The families (normal or
Student-t phi) are ppl.families.studentt's; the gradient is ADVI's pathwise one and the loop the
stochastic fits' one (ppl.inference.loop: draw dropping, NaN recovery, Stan's stopping rule,
best-ELBO fallback, checkpoints), with Stan's adaptive step sequence or the paper's schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ppl.errors import FitError
from ppl.families.studentt import DiagonalScale, FullScale, StandardDistribution
from ppl.inference.advi import fit_advi
from ppl.inference.result import VIResult

RANKS = ("full", "diag")
SCHEDULES = ("adaptive", "decay", "robbins-monro")


class DecaySchedule:
    """The paper's section 3.2 schedule: rho_t = eta * 0.95^floor(t / 5000), 0.1 rho_t for C."""

    def __init__(self, scale_part: np.ndarray, every: int = 5000, factor: float = 0.95):
        self.scale = np.where(scale_part, 0.1, 1.0)
        self.every, self.factor, self.k = every, factor, 0

    def direction(self, grad: np.ndarray) -> np.ndarray:
        self.k += 1
        return self.factor ** ((self.k - 1) // self.every) * self.scale * grad


class RobbinsMonroSchedule:
    """rho_t = eta (1 + t)^-0.7: sum rho_t = inf, sum rho_t^2 < inf (the paper's section 2)."""

    def __init__(self, size: int, kappa: float = 0.7):
        self.kappa, self.k = kappa, 0

    def direction(self, grad: np.ndarray) -> np.ndarray:
        self.k += 1
        return self.k ** (-self.kappa) * grad


@dataclass
class DSVIResult(VIResult):
    """q = law of mean + scale_tril z, z ~ `base` (Gaussian when the base is normal)."""

    base: StandardDistribution | None = None
    schedule: str = "adaptive"

    @property
    def label(self) -> str:
        shape = "full-rank" if self.method == "dsvi-full" else "diagonal"
        dist = "Gaussian" if self.base is None or self.base.dof is None else self.base.name
        return f"{shape} {dist}"

    @property
    def sd(self) -> np.ndarray:
        """Marginal sds: the scale's, times sqrt(nu / (nu - 2)) for a Student-t (inf if nu <= 2)."""
        scale = np.sqrt(np.sum(self.scale_tril**2, axis=1))
        return scale * np.sqrt((self.base or StandardDistribution()).variance())

    @property
    def cov(self) -> np.ndarray:
        variance = (self.base or StandardDistribution()).variance()
        return self.scale_tril @ self.scale_tril.T * variance

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        base = self.base or StandardDistribution()
        return self.mean + base.sample(rng, n, self.dim) @ self.scale_tril.T

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        z, logdet = self.standardise(zeta)
        return (self.base or StandardDistribution()).log_density(z) - logdet


def fit_dsvi(
    log_joint,
    dim: int,
    *,
    rank: str = "full",
    dof: float | None = None,
    schedule: str = "adaptive",
    eta: float | None = None,
    grad_log_joint=None,
    point=None,
    closed: list[ClosedForm] | None = None,
    **options,
) -> DSVIResult:
    """DSVI over the unconstrained space; `options` are fit_advi's (max_iter, tol_rel_obj, ...).

    `eta=None` picks the base step from Stan's grid (also for the paper's schedules); the paper
    used eta = 0.05 / N with `decay`. `grad_log_joint`: a minibatch estimate of the log joint for
    the gradients (ppl.inference.subsample.SubsampledLogJoint). `point`: the columns of
    hyperparameters (point estimates, no q), `closed` those of them with a closed-form optimum.
    """
    if rank not in RANKS:
        raise FitError(f"DSVI: unknown rank {rank!r}; use one of {', '.join(RANKS)}")
    if schedule not in SCHEDULES:
        raise FitError(f"DSVI: unknown schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    base = StandardDistribution(dof)
    point = np.asarray([] if point is None else point, dtype=int)
    family = (FullScale if rank == "full" else DiagonalScale)(int(dim) - len(point), base)
    if len(point):
        family = WithHyperparameters(family, int(dim), point, closed or [])
    inner = getattr(family, "inner", family)
    scale_part = np.zeros(family.size, bool)  # the entries of C in theta (the rest: mu, points)
    scale_part[inner.dim : inner.size] = True
    make_steps = {
        "adaptive": None,
        "decay": lambda size: DecaySchedule(scale_part),
        "robbins-monro": RobbinsMonroSchedule,
    }[schedule]
    extra = {} if make_steps is None else {"schedule": make_steps}
    vi = fit_advi(
        log_joint, dim, method=family, eta=eta, grad_log_joint=grad_log_joint, **extra, **options
    )
    values = {f.name: getattr(vi, f.name) for f in fields(VIResult)}
    return DSVIResult(**values, base=base, schedule=schedule)


# --------------------------------------------------------------------------------------------------
# Hyperparameters: point estimates that maximise the ELBO (type-II maximum likelihood).


@dataclass
class ClosedForm:
    """`x ~ normal(0, ell)` with ell a positive hyperparameter used nowhere else: the ELBO's
    maximiser over ell is ell^2 = E_q[x^2] = mu^2 + var (eq. 13 -> 14), shared over x's elements
    when ell is a scalar. By the envelope theorem the gradient of the remaining terms at that ell
    is the gradient of the reduced objective (eq. 14), so ell needs no gradient of its own."""

    hyper: np.ndarray  # unconstrained columns of ell (log scale)
    target: np.ndarray  # columns of x


class WithHyperparameters:
    """A DSVI family over the ordinary parameters plus point values for the hyperparameters:
    gradient ascent on E_q[log p] for the general ones, the closed form for ClosedForm ones."""

    def __init__(self, inner, dim: int, point: np.ndarray, closed: list[ClosedForm]):
        self.inner, self.dim = inner, dim
        self.name, self.base = inner.name, inner.base
        mask = np.zeros(dim, bool)
        mask[point] = True
        self.free = np.flatnonzero(~mask)
        closed_cols = np.concatenate([c.hyper for c in closed]) if closed else np.zeros(0, int)
        self.point = np.setdiff1d(point, closed_cols)  # hyperparameters moved by gradients
        self.closed = closed
        self.where = np.empty(dim, int)  # each column's position among the free ones
        self.where[self.free] = np.arange(len(self.free))
        self.size = inner.size + len(self.point)

    def _split(self, theta):
        return theta[: self.inner.size], theta[self.inner.size :]

    def initial(self, mu0: np.ndarray) -> np.ndarray:
        return np.concatenate([self.inner.initial(mu0[self.free]), mu0[self.point]])

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.inner.noise(rng, n)

    def point_values(self, theta) -> np.ndarray:
        inner, values = self._split(theta)
        out = np.zeros(self.dim)
        out[self.point] = values
        if self.closed:
            second = self.inner.second_moment(inner)  # E_q[x^2] per free column (normal z)
            for c in self.closed:
                ell2 = second[self.where[c.target]]
                ell2 = ell2 if len(c.hyper) == len(c.target) else np.mean(ell2, keepdims=True)
                out[c.hyper] = 0.5 * np.log(np.maximum(ell2, 1e-300))
        return out

    def zeta(self, theta, z):
        out = np.tile(self.point_values(theta), (z.shape[0], 1))
        out[:, self.free] = self.inner.zeta(self._split(theta)[0], z)
        return out

    def entropy(self, theta) -> float:
        return self.inner.entropy(self._split(theta)[0])

    def grad(self, theta, z, g) -> np.ndarray:
        inner, _ = self._split(theta)
        return np.concatenate([self.inner.grad(inner, z, g[:, self.free]),
                               g[:, self.point].mean(axis=0)])  # fmt: skip

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mean, scale = self.point_values(theta), np.zeros((self.dim, self.dim))
        m, C = self.inner.mean_scale(self._split(theta)[0])
        mean[self.free] = m
        scale[np.ix_(self.free, self.free)] = C
        return mean, scale


def closed_forms(model) -> list[ClosedForm]:
    """The hyperparameters with a closed-form optimum: `x ~ normal(0, ell)`, ell declared
    `<lower=0>` in `hyperparameters` and used in no other statement, x an unbounded parameter
    with as many elements as ell (or ell a scalar)."""
    from ppl.ir.queries import normal_scale_priors

    latents = {lat.name: lat for lat in model.latents}
    out = []
    for scale, x in normal_scale_priors(model.ir):
        lx, lh = latents.get(x), latents.get(scale)
        if lx is None or lh is None or lx.hyper or not lh.hyper or lx.kind != "identity":
            continue
        if lh.support != "positive" or lh.size not in (1, lx.size):
            continue
        cols = np.arange(lh.offset, lh.offset + lh.size)
        out.append(ClosedForm(cols, np.arange(lx.offset, lx.offset + lx.size)))
    return out
