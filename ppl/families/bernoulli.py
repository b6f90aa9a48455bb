"""Bernoulli q for a binary latent: theta = the logit of P(z = 1), one number per coordinate.

Its draws cannot be reparameterised, so it only offers what score-function gradients need
(ppl.inference.estimators): independent draws, log q and its score.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit


class Bernoulli:
    family = "bernoulli"
    n_params = 1

    def __init__(self, dim: int):
        self.dim = int(dim)
        self.size = self.dim

    def initial(self, init_zeta: np.ndarray) -> np.ndarray:
        """q(z = 1) = 1/2, whatever the initial point says."""
        return np.zeros(self.dim)

    def rvs(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        return (rng.uniform(size=(n, self.dim)) < expit(theta)).astype(float)

    def log_q_terms(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        return zeta * log_expit(theta) + (1 - zeta) * log_expit(-theta)

    def score(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        return zeta - expit(theta)

    def describe(self, theta: np.ndarray) -> dict:
        return {"family": "bernoulli", "p": expit(theta).tolist()}
