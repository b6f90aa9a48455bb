"""Stan's ADVI step-size sequence (adaGrad/RMSprop hybrid with a Robbins-Monro t^-1/2 decay)."""

from __future__ import annotations

import numpy as np

#: Stan's grid of candidate base step sizes, tried from largest to smallest.
ETA_GRID: tuple[float, ...] = (100.0, 10.0, 1.0, 0.1, 0.01)
#: The grid for score-function fits (BBVI): Stan's first step moves every parameter by about
#: eta whatever its gradient, and a logit moved by 10 saturates a Bernoulli q for good (its
#: score gradient p (1 - p) vanishes), a log sd moved by 10 makes q's draws overflow.
SCORE_ETA_GRID: tuple[float, ...] = (1.0, 0.1, 0.01)

_TAU = 1.0  # keeps the step bounded when the gradient history is tiny
_PRE, _POST = 0.9, 0.1  # exponential weights of the squared-gradient history


class StanStepSize:
    """s_k = 0.1 g^2 + 0.9 s_{k-1} (s_1 = g^2); rho_k = eta k^(-1/2 + 1e-16) / (tau + sqrt(s_k)).

    ``direction`` returns rho_k g / eta so a caller can redo the same step with a smaller eta (NaN
    recovery) without recomputing the gradient.
    """

    def __init__(self, size: int) -> None:
        self.history = np.zeros(size)
        self.k = 0

    def direction(self, grad: np.ndarray) -> np.ndarray:
        """Advance the history with ``grad`` and return the per-unit-eta update."""
        self.k += 1
        with np.errstate(over="ignore"):  # an overflowing history only makes the step 0
            self._update(grad)
        return self.k ** (-0.5 + 1e-16) * grad / (_TAU + np.sqrt(self.history))

    def _update(self, grad: np.ndarray) -> None:
        if self.k == 1:
            self.history = np.square(grad)
        else:
            self.history = _PRE * self.history + _POST * np.square(grad)


class PhaseStepSize(StanStepSize):
    """Stan's sequence without its k^(-1/2) decay: rho_k = eta / (tau + sqrt(s_k)).

    The optimum rule (ppl.inference.stopping.OptimumRule) decreases eta itself, by halving it
    once the iterates are stationary, as RABVI does (Welandawe et al. 2022: a fixed learning
    rate per phase). Under a k^(-1/2) decay a start far from the optimum is left behind
    (a 20,000-row regression's intercept had covered 9.6 of 11 units after 10,000 steps), and
    the iterates never look stationary while they still travel.
    """

    def direction(self, grad: np.ndarray) -> np.ndarray:
        self.k += 1
        with np.errstate(over="ignore"):
            self._update(grad)
        return grad / (_TAU + np.sqrt(self.history))
