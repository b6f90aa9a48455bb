"""A multivariate normal with an LKJ prior on its correlation fits by default (issue 23), in
Stan's two ways of writing it: a Cholesky factor (lkj_corr_cholesky + multi_normal_cholesky)
and a correlation matrix (lkj_corr + multi_normal with quad_form_diag). The two are the same
posterior, so their fits must agree; with 200 rows it sits near the sample's own correlations,
sds and means (within a few posterior sds), and neither fit may be called degenerate (a
correlation matrix's diagonal is 1 by construction, not a collapsed q)."""

from __future__ import annotations

import numpy as np

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

HEAD = "data { int N; array[N] vector[3] y; }\n"
CHOLESKY = HEAD + """
parameters { cholesky_factor_corr[3] L; vector<lower=0>[3] tau; vector[3] mu; }
transformed parameters { corr_matrix[3] Omega = multiply_lower_tri_self_transpose(L); }
model { L ~ lkj_corr_cholesky(2); tau ~ cauchy(0, 2.5); mu ~ normal(0, 5);
        y ~ multi_normal_cholesky(mu, diag_pre_multiply(tau, L)); }
"""
MATRIX = HEAD + """
parameters { corr_matrix[3] Omega; vector<lower=0>[3] tau; vector[3] mu; }
model { Omega ~ lkj_corr(2); tau ~ cauchy(0, 2.5); mu ~ normal(0, 5);
        y ~ multi_normal(mu, quad_form_diag(Omega, tau)); }
"""


def test_lkj_multivariate_normal_fits_by_default_in_both_forms():
    rng = np.random.default_rng(0)
    sd = np.array([1.0, 2.0, 0.5])
    R = np.array([[1, 0.5, 0.2], [0.5, 1, 0.3], [0.2, 0.3, 1]])
    y = rng.multivariate_normal([1.0, -1.0, 0.5], R * np.outer(sd, sd), size=200)
    data = {"N": 200, "y": y}
    fits = [fit(CompiledModel(check(parse(src, "m.stan")), data), "auto", seed=1, draws=4000)
            for src in (CHOLESKY, MATRIX)]  # fmt: skip
    for f in fits:
        assert f.vi.converged and f.diagnostics["khat"] <= 0.7, f.warnings
        omega = f.draws["Omega"]
        # a correlation's posterior sd at N = 200 is about 0.06: within 3 of the sample's
        assert np.all(np.abs(omega.mean(0) - np.corrcoef(y.T)) < 3 * 0.07)
        np.testing.assert_allclose(f.draws["tau"].mean(0), y.std(0), rtol=0.1)
        assert np.all(np.abs(f.draws["mu"].mean(0) - y.mean(0)) < 3 * y.std(0) / np.sqrt(200))
    # the same posterior: means agree to a fraction of a posterior sd (4000 draws each)
    for name in ("Omega", "tau", "mu"):
        a, b = fits[0].draws[name], fits[1].draws[name]
        spread = np.maximum(a.std(0), 1e-9)
        assert np.all(np.abs(a.mean(0) - b.mean(0)) <= 0.15 * spread + 1e-9), name
