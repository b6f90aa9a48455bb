"""Binary latents by the score function, continuous ones by pathwise gradients, one optimisation.

For q = q_b(z) q_c(zeta_c) the ELBO's gradient splits: with respect to the continuous parameters
it is E_{q_b} of the reparameterisation gradient at fixed z (ADVI's / SGVB's, low variance); with
respect to the Bernoulli logits it is the score-function gradient of BBVI, Rao-Blackwellised over
z_d's Markov blanket and with control variates, evaluated at the same draws (the continuous part
of q, independent of z, drops out of it). So only the latents that need the score function pay its
variance. This is what `--method auto` does for a model with binary parameters.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import value_and_grad

from ppl.families.composite import Block, MixedFamily
from ppl.inference.bbvi import FamilyObjective
from ppl.inference.estimators import LogJointTerms, log_joint_terms, score_gradient


class MixedObjective(FamilyObjective):
    """theta = (continuous family's parameters, Bernoulli logits)."""

    def __init__(
        self,
        model,
        continuous: MixedFamily,
        columns: np.ndarray,
        binary: MixedFamily,
        terms: LogJointTerms,
        draws: int,
    ):
        """`continuous` acts on the compact vector of the non-binary coordinates `columns`;
        `binary` is a family of Bernoulli blocks over the full coordinate vector."""
        self.model = model
        self.continuous = continuous
        self.binary = binary
        self.terms = terms
        self.draws_per_step = draws
        self.estimator = "pathwise + rb+cv"
        self.n_c = continuous.size
        D = model.dim
        self.columns = np.asarray(columns, dtype=int)
        self.binary_columns = np.setdiff1d(np.arange(D), self.columns)
        # the full vector as runs of consecutive coordinates from either part: slices and one
        # concatenate (a fancy-indexed gather would cost an np.add.at in every backward pass)
        source = np.zeros(D, dtype=int)  # 0: continuous, 1: binary
        source[self.binary_columns] = 1
        position = np.zeros(D, dtype=int)
        position[self.columns] = np.arange(len(self.columns))
        position[self.binary_columns] = np.arange(len(self.binary_columns))
        self.runs = []
        start = 0
        for d in range(1, D + 1):
            if d == D or source[d] != source[start] or position[d] != position[d - 1] + 1:
                self.runs.append(
                    (int(source[start]), int(position[start]), int(position[d - 1]) + 1)
                )
                start = d

    @property
    def warnings(self) -> list[str]:
        return self.terms.warnings

    def initial(self, init_zeta: np.ndarray) -> np.ndarray:
        theta_c = self.continuous.initial(init_zeta[self.columns])
        return np.concatenate([theta_c, self.binary.initial(init_zeta)])

    def _assemble(self, cont, z):
        """Full (S, D) draws from the continuous block (maybe autograd-boxed) and 0/1 draws."""
        if len(self.binary_columns) == 0:
            return cont
        parts = (cont, z[:, self.binary_columns])
        return anp.concatenate([parts[k][:, a:b] for k, a, b in self.runs], axis=1)

    def estimate(self, theta: np.ndarray, rng: np.random.Generator):
        theta_c, theta_b = theta[: self.n_c], theta[self.n_c :]
        z = self.binary.rvs(theta_b, rng, self.draws_per_step)
        eps = rng.standard_normal((self.draws_per_step, len(self.columns)))

        def elbo_c(th):
            cont, entropy = self.continuous.draws(th, eps)
            lp = self.model.log_joint(self._assemble(cont, z), binary=True)
            return anp.mean(lp) + entropy

        with np.errstate(all="ignore"):
            if self.n_c:
                value, grad_c = value_and_grad(elbo_c)(theta_c)
            else:  # only binary latents: nothing to differentiate pathwise
                value, grad_c = elbo_c(theta_c), np.zeros(0)
            cont, entropy = self.continuous.draws(theta_c, eps)
            zeta = np.asarray(self._assemble(np.asarray(cont), z))
            total, local = self.terms(zeta)
        if not (np.isfinite(value) and np.all(np.isfinite(grad_c))):
            return None
        if local is not None and not np.all(np.isfinite(local)):
            return None
        log_q_b = self.binary.log_q_terms(theta_b, zeta)
        grad_b = score_gradient(self.binary, theta_b, zeta, total, local, "rb+cv", log_q_b)
        elbo = float(np.mean(total - log_q_b.sum(axis=1)) + entropy)
        return np.concatenate([np.asarray(grad_c), grad_b]), elbo, 0

    def fresh_elbo(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> float:
        theta_c, theta_b = theta[: self.n_c], theta[self.n_c :]
        z = self.binary.rvs(theta_b, rng, n)
        cont, entropy = self.continuous.draws(theta_c, rng.standard_normal((n, len(self.columns))))
        zeta = np.asarray(self._assemble(np.asarray(cont), z))
        total, _ = self.terms(zeta)
        with np.errstate(invalid="ignore"):
            values = total - self.binary.log_q_terms(theta_b, zeta).sum(axis=1)
        return float(np.mean(values) + entropy) if np.all(np.isfinite(values)) else -np.inf

    def sample(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        theta_c, theta_b = theta[: self.n_c], theta[self.n_c :]
        z = self.binary.rvs(theta_b, rng, n)
        cont, _ = self.continuous.draws(theta_c, rng.standard_normal((n, len(self.columns))))
        return np.asarray(self._assemble(np.asarray(cont), z))

    def log_q(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        theta_c, theta_b = theta[: self.n_c], theta[self.n_c :]
        continuous = self.continuous.log_q(theta_c, zeta[:, self.columns])
        return continuous + self.binary.log_q_terms(theta_b, zeta).sum(axis=1)

    def describe(self, theta: np.ndarray) -> dict[str, dict]:
        out = self.continuous.describe(theta[: self.n_c])
        out.update(self.binary.describe(theta[self.n_c :]))
        return {lat.name: out[lat.name] for lat in self.model.latents if lat.name in out}


def setup_mixed(
    model, families: dict[str, str], init: np.ndarray, rng: np.random.Generator, draws: int
) -> tuple[MixedObjective, np.ndarray]:
    """The objective and its starting parameters; binary latents start at q(z = 1) = 1/2."""
    blocks_c, columns, offset = [], [], 0
    for lat in model.latents:
        if not lat.binary and lat.size:
            blocks_c.append(Block(lat.name, families[lat.name], offset, lat.size))
            columns.append(np.arange(lat.offset, lat.offset + lat.size))
            offset += lat.size
    blocks_b = [Block(lat.name, families[lat.name], lat.offset, lat.size) for lat in model.latents
                if lat.binary and lat.size]  # fmt: skip
    columns = np.concatenate(columns) if columns else np.zeros(0, dtype=int)
    objective = MixedObjective(
        model, MixedFamily(blocks_c, offset), columns, MixedFamily(blocks_b, model.dim),
        LogJointTerms(model, None), draws,
    )  # fmt: skip
    theta0 = objective.initial(init)
    # only the binary coordinates use blankets
    draws = objective.sample(theta0, rng, 2)
    objective.terms = log_joint_terms(model, draws, rng, objective.binary_columns)
    return objective, theta0


def with_families(objective: MixedObjective, theta: np.ndarray, families: dict[str, str]):
    """The same objective with new continuous families, and theta moment-matched to them.

    A gamma block starts as the gamma with the Gaussian's mean and variance of log x: the
    softplus-parameterised shape of a well-determined positive latent is in the hundreds, which
    fixed-scale steps take tens of thousands of iterations to reach from a cold start.
    """
    old = objective.continuous
    blocks = [Block(b.name, families[b.name], b.offset, b.size) for b in old.blocks]
    new = MixedFamily(blocks, old.dim)
    moved = MixedObjective(
        objective.model, new, objective.columns, objective.binary, objective.terms,
        objective.draws_per_step,
    )  # fmt: skip
    theta_c = new.from_gaussian(*old.moments(theta[: objective.n_c]))
    return moved, np.concatenate([theta_c, theta[objective.n_c :]])
