"""A family per latent, one q over all of them: q(zeta) = prod over blocks of q_block.

Every latent (a block: its slice of the unconstrained vector) gets one of the per-family classes
of ppl.families.registry.FAMILIES; theta holds each block's parameters in block order, laid out
as that class lays them out (a mean-field Gaussian: means then log sds; a gamma: softplus^-1
shapes then softplus^-1 rates; a Bernoulli: logits). A gamma block's coordinate is the model's
unconstrained one, zeta = log x, so the compiled log joint, its log-Jacobians and the output code
are shared with the Gaussian fits.

Pathwise fits (SGVB, the fixed-draw road) use ``draws``; score-function ones (BBVI) use ``rvs``,
``log_q_terms`` and ``score``, which act on all blocks of one family at once (their columns and
parameters gathered). Adding a family: its class (ppl/families/NAME.py) and its entry in
ppl/families/registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import autograd.numpy as anp
import numpy as np

from ppl.families.gamma import GammaFamily
from ppl.families.gaussian import MeanFieldGaussian
from ppl.families.registry import FAMILIES


@dataclass
class Block:
    """A latent's slice of the unconstrained vector and the family that approximates it."""

    name: str
    family: str
    offset: int
    size: int


def blocks_of(model, families: dict[str, str]) -> list[Block]:
    """A block per latent of `model` (anything with ``latents``: name, offset, size) with the
    family `families` names for it."""
    return [Block(lat.name, families[lat.name], lat.offset, lat.size)
            for lat in model.latents if lat.size]  # fmt: skip


class MixedFamily:
    """The product of the blocks' families over a `dim`-vector of unconstrained coordinates."""

    def __init__(self, blocks: list[Block], dim: int):
        self.blocks = blocks
        self.dim = dim
        self.parts = []  # (block, its family over the block, first index in theta)
        k = 0
        for b in blocks:
            if b.family not in FAMILIES:
                raise ValueError(f"unknown family {b.family!r}")
            fam = FAMILIES[b.family].cls(b.size)
            self.parts.append((b, fam, k))
            k += fam.size
        self.size = k
        self.gamma_columns = np.zeros(dim, dtype=bool)
        for b in blocks:
            if FAMILIES[b.family].cls is GammaFamily:
                self.gamma_columns[b.offset : b.offset + b.size] = True
        self._order = np.argsort([b.offset for b in blocks])
        # score-function view: per family, its columns, its parameters' positions, one instance
        self.gathered = []
        for name, spec in FAMILIES.items():
            cls = spec.cls
            mine = [(b, k) for b, _, k in self.parts if b.family == name]
            if mine:
                cols = np.concatenate([np.arange(b.offset, b.offset + b.size) for b, _ in mine])
                positions = np.concatenate(
                    [k + j * b.size + np.arange(b.size) for j in range(cls.n_params)
                     for b, k in mine]
                )  # fmt: skip
                self.gathered.append((cols, positions, cls(len(cols))))
        # the coordinate of zeta each parameter belongs to
        self.param_column = np.zeros(self.size, dtype=int)
        for b, fam, k in self.parts:
            self.param_column[k : k + fam.size] = np.tile(np.arange(b.offset, b.offset + b.size),
                                                          fam.n_params)  # fmt: skip

    def _split(self, theta):
        for b, fam, k in self.parts:
            yield b, fam, theta[k : k + fam.size]

    def _ordered(self, parts: list):
        return [parts[i] for i in self._order]

    # -- parameters ----------------------------------------------------------------------------

    def initial(self, init_zeta: np.ndarray) -> np.ndarray:
        """Gaussian blocks: mean init, sd 1 (Stan); gamma blocks: shape 10, mean exp(init);
        Bernoulli blocks: q(z = 1) = 1/2."""
        parts = [fam.initial(np.asarray(init_zeta[b.offset : b.offset + b.size], dtype=float))
                 for b, fam, _ in self.parts]  # fmt: skip
        return np.concatenate(parts) if parts else np.zeros(0)

    def from_gaussian(self, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        """theta matching a mean-field Gaussian on zeta: each block moment-matched (a gamma
        block: the gamma whose log has the same mean and variance)."""
        parts = []
        for b, fam, _ in self.parts:
            cols = slice(b.offset, b.offset + b.size)
            parts.append(fam.from_gaussian(mean[cols], sd[cols]))
        return np.concatenate(parts) if parts else np.zeros(0)

    def moved_from(self, other: MixedFamily, theta: np.ndarray) -> np.ndarray:
        """theta for this family from `other`'s (same blocks): a block of the same family keeps
        its parameters, another is moment-matched to the other's mean and sd."""
        parts = []
        for (_, fam, _), (_, theirs, part) in zip(self.parts, other._split(theta), strict=True):
            if type(fam) is type(theirs):
                parts.append(part)
            else:
                parts.append(fam.from_gaussian(*theirs.moments(part)))
        return np.concatenate(parts) if parts else np.zeros(0)

    def describe(self, theta: np.ndarray) -> dict[str, dict]:
        """Per latent: the family and its fitted parameters (for fit.json)."""
        return {b.name: fam.describe(part) for b, fam, part in self._split(np.asarray(theta))}

    def moments(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of each unconstrained coordinate under q (a gamma block: of log x)."""
        mean, sd = np.zeros(self.dim), np.zeros(self.dim)
        for b, fam, part in self._split(np.asarray(theta, dtype=float)):
            cols = slice(b.offset, b.offset + b.size)
            mean[cols], sd[cols] = fam.moments(part)
        return mean, sd

    def changes(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """How far q moved between two parameter vectors, per parameter and unitless."""
        out = []
        pairs = zip(self._split(np.asarray(before, dtype=float)),
                    self._split(np.asarray(after, dtype=float)), strict=True)  # fmt: skip
        for (_, fam, old), (_, _, new) in pairs:
            out += fam.changes(old, new)
        return np.concatenate(out) if out else np.zeros(0)

    def mean_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Where the Gaussian blocks' means sit in theta, and their coordinates of zeta."""
        positions, coords = [], []
        for b, fam, k in self.parts:
            if isinstance(fam, MeanFieldGaussian):
                positions.append(np.arange(k, k + b.size))
                coords.append(np.arange(b.offset, b.offset + b.size))
        if not positions:
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        return np.concatenate(positions), np.concatenate(coords)

    # -- pathwise: draws from noise, differentiable in theta -----------------------------------

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws of zeta for standard-normal noise eps, and q's entropy on the zeta scale."""
        columns, entropy = [], 0.0
        for b, fam, part in self._split(theta):
            zeta, terms = fam.draw_terms(part, eps[:, b.offset : b.offset + b.size])
            columns.append(zeta)
            for term in terms:
                entropy = entropy + term
        if not columns:  # no continuous latents (a model whose parameters are all binary)
            return np.zeros((eps.shape[0], 0)), 0.0
        return anp.concatenate(self._ordered(columns), axis=1), entropy

    def mean_map(self, theta):
        """E_q[zeta] for every coordinate, differentiable in theta (a gamma block: of log x)."""
        parts = [fam.mean_map(part) for _, fam, part in self._split(theta)]
        return anp.concatenate(self._ordered(parts)) if parts else np.zeros(0)

    def control_columns(self) -> np.ndarray:
        """The gamma blocks' coordinates: under a small shape, log x has a heavy left tail and
        x a heavy right one, whose Monte Carlo error linear control variates in both remove
        (E_q[log x] and E_q[x] are exact)."""
        return np.flatnonzero(self.gamma_columns)

    def control_features(self, zeta):
        """(S, 2G) features of the control columns: log x and x."""
        z = zeta[:, self.control_columns()]
        return anp.concatenate([z, anp.exp(z)], axis=1)

    def exact_means(self, theta):
        """E_q of the control features, differentiable: digamma(a) - log b, and a / b."""
        logs, means, offsets = [], [], []
        for b, fam, part in self._split(theta):
            if isinstance(fam, GammaFamily):
                log_mean, mean = fam.exact_means(part)
                logs.append(log_mean)
                means.append(mean)
                offsets.append(b.offset)
        if not logs:
            return np.zeros(0)
        order = np.argsort(offsets)
        return anp.concatenate([logs[i] for i in order] + [means[i] for i in order])

    def log_q(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """(S,) log q(zeta) on the zeta scale (a gamma block's density of log x)."""
        out = np.zeros(zeta.shape[0])
        for b, fam, part in self._split(np.asarray(theta)):
            out += np.sum(fam.log_q_terms(part, zeta[:, b.offset : b.offset + b.size]), axis=1)
        return out

    # -- score function: independent draws, log q per coordinate, the score ---------------------

    def rvs(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, D) independent draws by each family's own sampler."""
        zeta = np.zeros((n, self.dim))
        for cols, positions, fam in self.gathered:
            zeta[:, cols] = fam.rvs(theta[positions], rng, n)
        return zeta

    def log_q_terms(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """(S, D): log q of each coordinate of each draw, on the zeta scale."""
        out = np.zeros_like(zeta)
        for cols, positions, fam in self.gathered:
            out[:, cols] = fam.log_q_terms(theta[positions], zeta[:, cols])
        return out

    def score(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """(S, P): d log q(zeta_s) / d theta_p, each parameter through its own coordinate."""
        out = np.zeros((zeta.shape[0], self.size))
        for cols, positions, fam in self.gathered:
            out[:, positions] = fam.score(theta[positions], zeta[:, cols])
        return out
