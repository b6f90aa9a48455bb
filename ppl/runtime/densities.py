"""Log densities at a call site (`y ~ d(...)`, `d_lpdf(y | ...)`): value and parameters aligned
on their batch and vectorised axes, or summed through sufficient statistics where a pass marked
the site."""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp

from ppl.language.types import fast_ndim, fast_shape, to_array
from ppl.library.distributions.base import where


def _iid_gaussian_rows(dist, general):
    """`y ~ multi_normal(mu, Sigma)` over data rows sharing mu and Sigma, via sufficient statistics.

    sum_n log N(y_n | mu, Sigma) = -N/2 (D log 2 pi + log|Sigma|) - tr(Sigma^-1 S_mu) / 2 with
    S_mu = Y'Y - N (ybar mu' + mu ybar') + N mu mu': once Y'Y and ybar are known, a call costs
    O(D^3) whatever the number of rows N (the GPFA scaling of Knowles 2015).
    """
    cholesky_form = dist.name == "multi_normal_cholesky"
    stats: dict = {}

    def density(values):
        y, mu, cov = values
        if fast_ndim(y) < 2 or getattr(y, "_value", None) is not None:
            return general(values)  # y carries gradients or batch axes: no shared statistics
        if stats.get("y") is not y:
            rows = onp.asarray(y, dtype=float).reshape(-1, onp.shape(y)[-1])
            stats.update(y=y, n=rows.shape[0], ybar=rows.mean(axis=0), yty=rows.T @ rows)
        n, ybar, yty = stats["n"], stats["ybar"], stats["yty"]
        dim = yty.shape[0]
        mu = to_array(mu)
        if cholesky_form:
            cov = np.matmul(cov, np.swapaxes(cov, -1, -2))
        outer_mu = mu[..., :, None] * mu[..., None, :]
        cross = ybar[:, None] * mu[..., None, :]
        scatter = yty - n * (cross + np.swapaxes(cross, -1, -2)) + n * outer_mu
        try:
            sign, logdet = np.linalg.slogdet(cov)
            quad = np.sum(np.linalg.solve(cov, scatter) * onp.eye(dim), axis=(-2, -1))
        except onp.linalg.LinAlgError:
            return general(values)
        lp = -0.5 * (n * (dim * _LOG_2PI + logdet) + quad)
        return where(sign > 0, lp, -onp.inf)

    return density


_LOG_2PI = float(onp.log(2 * onp.pi))


def call_site_density(dist, ndims, events, sufficient: bool):
    """`values -> log density` for one call site: the alignment of value and parameters, through
    sufficient statistics where ppl.ir.passes.sufficient_statistics marked the site."""
    general = aligned_density(dist, ndims, events)
    return _iid_gaussian_rows(dist, general) if sufficient else general


def aligned_density(dist, ndims, events, elementwise: bool = False):
    ndims = list(ndims)
    vec = max(k - e for k, e in zip(ndims, events, strict=True))
    axes = tuple(range(-vec, 0)) if vec and not elementwise else None
    pads = [vec - (k - e) for k, e in zip(ndims, events, strict=True)]
    log_prob = dist.log_prob

    def density(values):
        arrs = [to_array(v) for v in values]
        batches = [fast_ndim(a) - k for a, k in zip(arrs, ndims, strict=True)]
        nb = max(batches)
        shaped = []
        for a, b, p in zip(arrs, batches, pads, strict=True):
            if nb == b and not p:
                shaped.append(a)
                continue
            shape = fast_shape(a)
            shaped.append(np.reshape(a, shape[:b] + (1,) * (nb - b + p) + shape[b:]))
        lp = log_prob(*shaped)
        if axes is not None:
            lp = np.sum(lp, axis=axes)
        return lp

    return density
