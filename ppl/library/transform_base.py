"""The base of Stan's constraining transforms (:class:`Transform`, :class:`Identity`) and the
numeric helpers several transforms share; ppl.library.transforms describes the conventions
(batch axes first, log|det J| summed over the type axes, autograd on the forward path)."""

from __future__ import annotations

from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

Array = Any  # numpy array, autograd ArrayBox or Python float


def log_inv_logit(u: Array) -> Array:
    """log(inv_logit(u)) without overflow: -log1p(exp(-u))."""
    return -anp.logaddexp(0.0, -u)


def log1m_inv_logit(u: Array) -> Array:
    """log(1 - inv_logit(u)) without overflow: -log1p(exp(u))."""
    return -anp.logaddexp(0.0, u)


def _sum_trailing(a: Array, n: int) -> Array:
    """Sum the last ``n`` axes (the parameter's remaining type axes)."""
    if n <= 0:
        return a
    nd = anp.ndim(a)
    if n > nd:
        raise ValueError(f"cannot sum {n} event axes of an array with {nd} axes")
    return anp.sum(a, axis=tuple(range(nd - n, nd)))


def plain_value(b: Array) -> np.ndarray:
    """The value under autograd's tracing, as a float array (for checks, not gradients)."""
    return np.asarray(getval(b), dtype=float)


class Transform:
    """One constraining transform.  ``core_ndim`` is how many constrained axes it consumes."""

    kind: str = ""
    support: str = "real"
    core_ndim: int = 0

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of the unconstrained slice for a constrained value of ``shape``."""
        return tuple(shape)

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        """Inverse of :meth:`unconstrained_shape`."""
        return tuple(ushape)

    def forward(self, u: Array, event_ndim: int | None = None) -> tuple[Array, Array]:
        """Map ``u`` to ``(x, log|det J|)``, the latter summed over ``event_ndim`` type axes."""
        if event_ndim is None:
            event_ndim = self.core_ndim
        if event_ndim < self.core_ndim:
            raise ValueError(f"{self.kind} needs event_ndim >= {self.core_ndim}")
        x, lj = self._forward(u)
        return x, _sum_trailing(lj, event_ndim - self.core_ndim)

    def inverse(self, x: Array) -> np.ndarray:
        """Map a constrained value back to the unconstrained space (plain numpy)."""
        raise NotImplementedError

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        """Whether every element / event of ``x`` satisfies the constraint (up to ``tol``)."""
        return bool(np.all(~np.isnan(np.asarray(x, dtype=float))))

    def _forward(self, u: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Identity(Transform):
    """Unconstrained ``real``: x = u, log|J| = 0."""

    kind = "identity"
    support = "real"

    def _forward(self, u: Array) -> tuple[Array, Array]:
        return u, anp.zeros(anp.shape(u))

    def inverse(self, x: Array) -> np.ndarray:
        return np.asarray(x, dtype=float)
