"""Stochastic-gradient ASCENT optimisers over a flat float64 parameter vector.

Usage::

    opt = make_optimizer("adadelta", size=theta.size)     # or "adagrad", "rmsprop", "sgd", "adam"
    theta = theta + opt.step(grad)                         # step returns the update to ADD

Every optimiser keeps its state inside; ``state_dict()`` returns a flat dict of numpy arrays and
Python numbers (hyperparameters, step count ``t`` and the running statistics; it can be passed to
``np.savez(path, **d)``) and ``load_state_dict(d)`` restores it, so a restored optimiser continues
with exactly the same updates.

Non-finite gradients: ``step`` raises :class:`NonFiniteGradientError` (a ``ValueError``) when the
gradient contains NaN or +-inf, and in that case leaves the state untouched, so the caller can
recover (redraw, shrink, skip) and call ``step`` again as if the bad call never happened. A
gradient of the wrong shape raises :class:`OptimizerError` (also a ``ValueError``).

Defaults (``DEFAULTS``) and where they come from; Knowles (2015), "Stochastic gradient variational
Bayes for gamma approximating distributions", Sec. 2.4, is "the paper":

- ``adadelta``: rho = 0.9, eps = 1e-4, momentum = 0.9 -- the paper's settings (rho and eps as used
  for GPFA, Sec. 4; lambda = 0.9 its recommended momentum, Sec. 5/Fig. 2).
- ``adagrad``: eta = 0.1, eps = 1e-6 -- the paper's gamma_t = 0.1 / (1e-6 + sqrt(sum_j g_j^2)).
- ``rmsprop``: eta = 0.01, decay = 0.9, eps = 1e-6 -- the paper's m <- 0.1 g^2 + 0.9 m,
  gamma_t = 0.01 / (1e-6 + sqrt(m)).
- ``sgd``: eta = 0.1, tau = 1, kappa = 0.7 -- rho_t = eta (t + tau)^(-kappa), t = 0, 1, 2, ... the
  number of earlier steps (so the first step uses eta tau^-kappa = eta). The paper gives no SGD
  schedule; kappa in (0.5, 1] is the Robbins-Monro range (sum rho_t = inf, sum rho_t^2 < inf), 0.7
  sits inside it with room on both sides, tau = 1 keeps the first step equal to eta.
- ``adam``: eta = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8 -- Kingma & Ba's (2015) values except
  eta: Adam's step is about eta per coordinate whatever the gradient scale, and unconstrained
  variational parameters are O(1)-O(10) away from their optimum, so Kingma & Ba's 1e-3 would need
  10^4 or more iterations to move that far while 1e-2 needs ~10^3 (a typical VI budget).

No Python loop runs over the elements of a vector: every update is a handful of numpy ufuncs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ppl.errors import FitError, PplError

__all__ = [
    "DEFAULTS",
    "OPTIMIZERS",
    "AdaDelta",
    "AdaGrad",
    "Adam",
    "NonFiniteGradientError",
    "Optimizer",
    "OptimizerError",
    "RMSprop",
    "SGD",
    "make_optimizer",
]


class OptimizerError(PplError, ValueError):
    """Bad optimiser name, option, state dict, or a gradient of the wrong shape."""


class NonFiniteGradientError(FitError, ValueError):
    """The gradient passed to ``step`` has NaN or inf entries; the optimiser state is unchanged."""


class Optimizer:
    """Common interface. Subclasses set ``name``, ``defaults``, ``_arrays`` and ``_update``."""

    name: ClassVar[str] = ""
    #: documented default hyperparameters (all floats)
    defaults: ClassVar[dict[str, float]] = {}
    #: names of the per-coordinate state arrays (each of shape (size,), zero at the start)
    _arrays: ClassVar[tuple[str, ...]] = ()

    def __init__(self, size: int, **options: float) -> None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise OptimizerError(f"optimizer size must be a non-negative integer, got {size!r}")
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            raise OptimizerError(
                f"unknown option(s) {', '.join(unknown)} for optimizer '{self.name}'; "
                f"valid options: {', '.join(self.defaults)}"
            )
        self.size = int(size)
        self.options: dict[str, float] = {}
        for key, default in self.defaults.items():
            self.options[key] = self._check_option(key, options.get(key, default))
        self.t = 0  # number of steps taken
        self.state: dict[str, np.ndarray] = {k: np.zeros(self.size) for k in self._arrays}

    # -- public interface -------------------------------------------------------------------
    def step(self, grad: np.ndarray) -> np.ndarray:
        """Return the update to ADD to the parameters for ascent along ``grad``; advance the state.

        Raises NonFiniteGradientError (ValueError) without touching the state if ``grad`` has
        NaN/inf entries, and OptimizerError (ValueError) if its shape is not ``(size,)``.
        """
        g = np.asarray(grad, dtype=float)
        if g.shape != (self.size,):
            raise OptimizerError(
                f"gradient has shape {g.shape}, the '{self.name}' optimizer expects ({self.size},)"
            )
        finite = np.isfinite(g)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise NonFiniteGradientError(
                f"non-finite gradient passed to the '{self.name}' optimizer: {bad.size} of "
                f"{g.size} entries (first at index {bad[0]}) are NaN or inf; state left unchanged"
            )
        with np.errstate(over="ignore", under="ignore"):
            new_state, delta = self._update(g)
        self.state = new_state
        self.t += 1
        return delta

    def state_dict(self) -> dict[str, Any]:
        """Flat dict: hyperparameters (float), ``t`` (int), ``size`` (int) and state arrays."""
        d: dict[str, Any] = dict(self.options)
        d["t"] = self.t
        d["size"] = self.size
        d.update({k: v.copy() for k, v in self.state.items()})
        return d

    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore a ``state_dict()`` (numbers may come back as 0-d arrays, e.g. from np.load)."""
        expected = set(self.defaults) | {"t", "size"} | set(self._arrays)
        keys = set(d)
        if keys != expected:
            raise OptimizerError(
                f"state dict does not belong to a '{self.name}' optimizer: "
                f"missing {sorted(expected - keys)}, unexpected {sorted(keys - expected)}"
            )
        if int(d["size"]) != self.size:
            raise OptimizerError(
                f"state dict is for size {int(d['size'])}, this optimizer has size {self.size}"
            )
        t = int(d["t"])
        if t < 0:
            raise OptimizerError(f"state dict has a negative step count t = {t}")
        options = {k: self._check_option(k, d[k]) for k in self.defaults}
        state = {}
        for k in self._arrays:
            arr = np.array(d[k], dtype=float)  # copy: later steps must not alter the caller's dict
            if arr.shape != (self.size,):
                raise OptimizerError(
                    f"state array '{k}' has shape {arr.shape}, expected ({self.size},)"
                )
            state[k] = arr
        self.options, self.t, self.state = options, t, state

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v:g}" for k, v in self.options.items())
        return f"{type(self).__name__}(size={self.size}, {opts}, t={self.t})"

    # -- for subclasses ---------------------------------------------------------------------
    def _check_option(self, key: str, value: Any) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise OptimizerError(
                f"option {key} of optimizer '{self.name}' must be a number, got {value!r}"
            ) from None
        lo, hi, lo_open, hi_open = _RANGES[key]
        ok = (
            np.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
        )
        if not ok:
            interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
            raise OptimizerError(
                f"option {key} of optimizer '{self.name}' must lie in {interval}, got {value!r}"
            )
        return v

    def _update(self, g: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Pure function of (self.state, self.t, g): the new state arrays and the update."""
        raise NotImplementedError


# allowed range of every hyperparameter: (low, high, low open?, high open?)
_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "eta": (0.0, np.inf, True, True),
    "eps": (0.0, np.inf, True, True),
    "rho": (0.0, 1.0, False, True),
    "decay": (0.0, 1.0, False, True),
    "momentum": (0.0, 1.0, False, True),
    "beta1": (0.0, 1.0, False, True),
    "beta2": (0.0, 1.0, False, True),
    "tau": (0.0, np.inf, True, True),
    "kappa": (0.5, 1.0, True, False),
}


class AdaDelta(Optimizer):
    """Zeiler's (2012) AdaDelta with the momentum of Knowles (2015), Sec. 2.4.

    With g the gradient and all operations elementwise (E_g, E_d, v start at 0)::

        E_g <- rho E_g + (1 - rho) g^2                         # Zeiler Alg. 1 line 4
        gamma = sqrt(E_d + eps) / sqrt(E_g + eps)              # Knowles' step size gamma
        v <- momentum v + (1 - momentum) g                     # Knowles' velocity
        delta = gamma v                                        # "v used in the place of g"
        E_d <- rho E_d + (1 - rho) delta^2                     # Zeiler Alg. 1 line 6

    How the paper combines the two (Sec. 2.4 and Algorithm 1): the step size gamma is computed by
    AdaDelta from the raw gradient g ("Compute step size gamma (e.g. using AdaDelta on
    [g_alpha, g_beta])"), and the velocity v "is then used in the place of g when updating the
    parameters", i.e. theta <- theta + gamma v instead of Algorithm 1's theta <- theta + gamma g.
    E_d accumulates the update actually made ("Delta theta is the update in parameter space");
    gamma uses E_d from before this step, as in Zeiler's Algorithm 1 (RMS[Delta x]_{t-1}).

    Weights: Sec. 2.4 prints v <- lambda g + (1 - lambda) v and m_g <- rho g^2 + (1 - rho) m_g,
    but Sec. 5 (Fig. 2) reads lambda = 0.9 as "using information from the last 1/(1-lambda) = 10
    samples" and 1 - lambda = 1 as "only the current gradient is used (no momentum)", and m_g is
    "the same running average ... as RMSprop" (0.9 on the old value). So lambda and rho weight
    the OLD value here, as in Zeiler's paper; with the printed weights lambda = 0 would freeze v at
    zero. The paper applies no bias correction to v, and neither does this class.
    """

    name = "adadelta"
    defaults = {"rho": 0.9, "eps": 1e-4, "momentum": 0.9}
    _arrays = ("sq_grad", "sq_delta", "velocity")

    def _update(self, g):
        rho, eps, lam = self.options["rho"], self.options["eps"], self.options["momentum"]
        s = self.state
        sq_grad = rho * s["sq_grad"] + (1.0 - rho) * g * g
        gamma = np.sqrt(s["sq_delta"] + eps) / np.sqrt(sq_grad + eps)
        velocity = lam * s["velocity"] + (1.0 - lam) * g
        delta = gamma * velocity
        sq_delta = rho * s["sq_delta"] + (1.0 - rho) * delta * delta
        return {"sq_grad": sq_grad, "sq_delta": sq_delta, "velocity": velocity}, delta


class AdaGrad(Optimizer):
    """Duchi et al. (2011), as in Knowles (2015): delta = eta g / (eps + sqrt(sum_{j<=t} g_j^2))."""

    name = "adagrad"
    defaults = {"eta": 0.1, "eps": 1e-6}
    _arrays = ("sum_sq_grad",)

    def _update(self, g):
        sum_sq = self.state["sum_sq_grad"] + g * g
        delta = self.options["eta"] * g / (self.options["eps"] + np.sqrt(sum_sq))
        return {"sum_sq_grad": sum_sq}, delta


class RMSprop(Optimizer):
    """Tieleman & Hinton (2012), as in Knowles (2015).

    m <- decay m + (1 - decay) g^2 (m starts at 0);  delta = eta g / (eps + sqrt(m)).
    """

    name = "rmsprop"
    defaults = {"eta": 0.01, "decay": 0.9, "eps": 1e-6}
    _arrays = ("sq_grad",)

    def _update(self, g):
        decay = self.options["decay"]
        sq = decay * self.state["sq_grad"] + (1.0 - decay) * g * g
        delta = self.options["eta"] * g / (self.options["eps"] + np.sqrt(sq))
        return {"sq_grad": sq}, delta


class SGD(Optimizer):
    """Plain SGD with Robbins-Monro steps: delta = rho_t g, rho_t = eta (t + tau)^(-kappa).

    t = 0, 1, 2, ... counts the earlier steps. kappa in (0.5, 1] makes sum_t rho_t diverge and
    sum_t rho_t^2 converge (Robbins & Monro 1951; the (t + tau)^-kappa form as in Hoffman et al.
    2013); tau > 0 delays the decay and keeps rho_0 = eta tau^-kappa finite.
    """

    name = "sgd"
    defaults = {"eta": 0.1, "tau": 1.0, "kappa": 0.7}
    _arrays = ()

    def rate(self, t: np.ndarray | int) -> np.ndarray | float:
        """Step size rho_t for step index t (0-based; vectorised over an array of t)."""
        o = self.options
        return o["eta"] * (np.asarray(t, dtype=float) + o["tau"]) ** (-o["kappa"])

    def _update(self, g):
        return {}, float(self.rate(self.t)) * g


class Adam(Optimizer):
    """Kingma & Ba (2015), bias-corrected, for ascent.

    m <- beta1 m + (1 - beta1) g;  v <- beta2 v + (1 - beta2) g^2;
    delta = eta (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps), t = 1, 2, ... this step.
    """

    name = "adam"
    defaults = {"eta": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    _arrays = ("m", "v")

    def _update(self, g):
        o = self.options
        b1, b2 = o["beta1"], o["beta2"]
        t = self.t + 1
        m = b1 * self.state["m"] + (1.0 - b1) * g
        v = b2 * self.state["v"] + (1.0 - b2) * g * g
        m_hat = m / (1.0 - b1**t)
        v_hat = v / (1.0 - b2**t)
        delta = o["eta"] * m_hat / (np.sqrt(v_hat) + o["eps"])
        return {"m": m, "v": v}, delta


OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.name: cls for cls in (AdaDelta, AdaGrad, RMSprop, SGD, Adam)
}

#: documented default hyperparameters of every optimiser (copies; editing them changes nothing)
DEFAULTS: dict[str, dict[str, float]] = {
    name: dict(cls.defaults) for name, cls in OPTIMIZERS.items()
}


def make_optimizer(name: str, size: int, **options: float) -> Optimizer:
    """Build the optimiser called ``name`` (case-insensitive) for a parameter vector of ``size``.

    Raises OptimizerError (a ValueError) for an unknown name, listing the valid ones, and for
    unknown or out-of-range options.
    """
    cls = OPTIMIZERS.get(name.lower()) if isinstance(name, str) else None
    if cls is None:
        raise OptimizerError(
            f"unknown optimizer {name!r}; valid names: {', '.join(sorted(OPTIMIZERS))}"
        )
    return cls(size, **options)
