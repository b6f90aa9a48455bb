"""Rao-Blackwellised summaries of a collapsed q (ppl.inference.collapse_summary) and the road
that collapses for them (ppl.methods.collapse_road): checked against Neal's funnel's exact
moments and eight schools' closed-form marginal, scipy's mixture quantiles, and outputs that
are not affine (they keep their draws)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.optimize import brentq

from ppl.data.build import build
from ppl.diagnostics.mcse_tail import tail_khats
from ppl.diagnostics.psis import fit_generalized_pareto
from ppl.inference.collapse_summary import mixture_quantiles
from ppl.outputs.report import summaries_text
from ppl.outputs.summary import fit_summary, summarise
from ppl.pipeline import fit

HARD = Path(__file__).resolve().parents[2] / "models" / "hard"


def _rows(result) -> dict:
    return {row[0]: row for row in fit_summary(result)}


def test_mixture_quantiles_are_scipys():
    rng = np.random.default_rng(0)
    m, s = rng.normal(size=(5, 3)), rng.uniform(0.1, 2.0, size=(5, 3))
    w = rng.dirichlet(np.ones(5))
    q = mixture_quantiles(m, s, w, (0.05, 0.5, 0.95))
    for j in range(3):
        for i, p in enumerate((0.05, 0.5, 0.95)):
            exact = brentq(lambda t, j=j, p=p: w @ stats.norm.cdf(t, m[:, j], s[:, j]) - p,
                           -20, 20, xtol=1e-13)  # fmt: skip
            assert abs(q[i, j] - exact) < 1e-9


def test_tail_khat_is_the_generalized_pareto_fit_of_each_column():
    rng = np.random.default_rng(1)
    S = 4000
    matrix = np.column_stack([rng.standard_normal(S), np.exp(1.5 * rng.standard_normal(S))
                              * rng.standard_normal(S), np.ones(S)])  # fmt: skip
    k = tail_khats(matrix, mean=False)["sd"]
    tail = int(np.ceil(min(0.2 * S, 3 * np.sqrt(S))))
    for j in range(2):
        sq = np.sort((matrix[:, j] - matrix[:, j].mean()) ** 2)
        assert abs(k[j] - fit_generalized_pareto(sq[-tail:] - sq[-tail - 1])[0]) < 1e-9
    assert k[0] < 0.3 < 0.7 < k[1]  # normal: light tail; a funnel's x: no reliable sd
    assert np.isnan(k[2])  # a constant: no tail to judge


def test_neal_funnel_summaries_are_its_exact_moments():
    """sd(x) = exp(9 / 4) needs E[e^v], v ~ N(0, 9), a quarter of which lies beyond the
    largest of 4000 draws; the grid's quadrature has it (and v's quantiles) to 1e-3."""
    model = build(str(HARD / "neal_funnel_10d" / "model.stan"),
                  [str(HARD / "neal_funnel_10d" / "data.json")], seed=2)  # fmt: skip
    result = fit(model, "auto", seed=2, draws=1000)
    assert "collapsed" in result.description
    assert "exact given q's grid" in summaries_text(result, None)
    rows = _rows(result)
    assert abs(rows["v"][1]) < 1e-3 and abs(rows["v"][3] / 3.0 - 1) < 1e-3
    assert abs(rows["v"][6] - 3.0 * stats.norm.ppf(0.95)) < 0.01
    for j in range(1, 10):
        _, mean, _, sd, q5, q50, q95 = rows[f"x[{j}]"]
        assert abs(mean) < 1e-3 and abs(sd / np.exp(9 / 4) - 1) < 1e-3
        assert abs(q95 - 5.305451507) < 0.01 and abs(q5 + 5.305451507) < 0.01
    assert result.diagnostics["verdict"] == "good"


def _eight_schools_exact() -> dict:
    """Moments of mu, tau, theta_tilde and theta by quadrature over log tau of the closed form:
    y ~ N(0, 25 11' + diag(sigma^2 + tau^2)) given tau, mu and theta Gaussian given tau."""
    d = json.loads((HARD / "eight_schools_noncentered" / "data.json").read_text())
    y, s2 = np.array(d["y"]), np.array(d["sigma"]) ** 2
    u = np.linspace(-14.0, 9.0, 8001)
    t = np.exp(u)
    v = s2[None, :] + t[:, None] ** 2  # (T, J)
    log_marginal = np.array([stats.multivariate_normal(np.zeros(8), 25.0 + np.diag(vi)).logpdf(y)
                             for vi in v])  # fmt: skip
    log_w = log_marginal + stats.cauchy(0, 5).logpdf(t) + np.log(t)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    V = 1.0 / (1 / 25.0 + np.sum(1 / v, axis=1))  # mu | tau, y
    m = V * np.sum(y / v, axis=1)
    prec = 1 / s2[None, :] + 1 / t[:, None] ** 2  # theta_j | mu, tau, y
    a = 1 / (s2[None, :] * prec)  # E[theta_j | mu, tau] = mu + a (y_j - mu)
    th_mean = m[:, None] + a * (y - m[:, None])
    th_var = 1 / prec + (1 - a) ** 2 * V[:, None]
    tt_mean = a * (y - m[:, None]) / t[:, None]
    tt_var = 1 / (prec * t[:, None] ** 2) + (a / t[:, None]) ** 2 * V[:, None]
    out = {}

    def moments(name, mean, var):
        mu = w @ mean
        out[name] = (mu, np.sqrt(w @ (var + (mean - mu) ** 2)))

    moments("mu", m, V)
    moments("tau", t, 0 * t)
    for j in range(8):
        moments(f"theta[{j + 1}]", th_mean[:, j], th_var[:, j])
        moments(f"theta_tilde[{j + 1}]", tt_mean[:, j], tt_var[:, j])
    return out


def test_eight_schools_summaries_are_the_closed_form_marginals():
    model = build(str(HARD / "eight_schools_noncentered" / "model.stan"),
                  [str(HARD / "eight_schools_noncentered" / "data.json")], seed=1)  # fmt: skip
    result = fit(model, "auto", seed=1, draws=1000)
    assert "collapsed" in result.description and "grid" in result.description
    rows = _rows(result)
    for name, (mean, sd) in _eight_schools_exact().items():
        assert abs(rows[name][1] - mean) < 0.01 * sd, name
        assert abs(rows[name][3] / sd - 1) < 0.01, name


MODEL = """
parameters {
  real v;
  vector[3] x;
}
model {
  v ~ normal(0, 1.5);
  x ~ normal(1, exp(v / 2));
}
generated quantities {
  real x2 = x[1]^2;
  real shifted = 2 * x[2] - v;
  real noise = normal_rng(x[3], 1);
}
"""


def test_outputs_not_affine_in_the_integrated_latents_keep_their_draws(tmp_path, monkeypatch):
    """x[1]^2 is not affine in x given v and normal_rng is not a function of q's coordinates:
    their summaries are the draws'; a linear generated quantity is exact."""
    from ppl.methods.collapse import COLLAPSED_CANDIDATE

    path = tmp_path / "funnel.stan"
    path.write_text(MODEL)
    model = build(str(path), [], seed=1)
    result = fit(model, "auto", seed=1, draws=1000)
    assert result.how is COLLAPSED_CANDIDATE
    exact = COLLAPSED_CANDIDATE.exact_summaries(result)
    plain = {row[0]: row for row in summarise(result.draws)}
    rows = _rows(result)
    names = list(plain)
    assert exact.exact[names.index("shifted")] and exact.exact[names.index("x[1]")]
    for name in ("x2", "noise"):
        assert not exact.exact[names.index(name)]
        assert rows[name] == plain[name]
    # shifted = 2 x[2] - v, x[2] | v ~ N(1, e^v), v ~ N(0, 1.5^2): var 4 E[e^v] + 2.25
    assert abs(rows["shifted"][1] - 2.0) < 1e-3
    assert abs(rows["shifted"][3] / np.sqrt(4 * np.exp(1.125) + 2.25) - 1) < 1e-3
    # nodes taken a few at a time (memory) give the same moments
    import ppl.inference.collapse_summary as cs

    monkeypatch.setattr(cs, "MAX_FLOATS", 50)
    result.vi.summaries.clear()
    again = COLLAPSED_CANDIDATE.exact_summaries(result)
    np.testing.assert_array_equal(again.exact, exact.exact)
    np.testing.assert_allclose(again.sd[exact.exact], exact.sd[exact.exact], rtol=1e-12)


def test_the_first_fit_is_kept_where_its_draws_give_every_sd(tmp_path):
    """A regular posterior (every tail light) is not collapsed for its summaries."""
    path = tmp_path / "normal.stan"
    path.write_text("parameters { real x; real<lower=0> s; } model { x ~ normal(0, 1); "
                    "s ~ lognormal(0, 0.3); }")  # fmt: skip
    result = fit(build(str(path), [], seed=1), "auto", seed=1, draws=1000)
    assert "collapsed" not in (result.description or "")
    assert summaries_text(result, None) is None
