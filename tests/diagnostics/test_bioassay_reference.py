"""The verdict on docs/python.md's bioassay fit, against the exact posterior (2-D grid
quadrature over alpha and beta). On most seeds the fit's log_lik summaries are wrong
(mean-field q ignores the correlation of alpha and beta, and unweighted q is too wide along
alpha + beta * dose, PSIS k-hat low), and the summaries' tail check is what says so: the test
holds that every fit that is not good is called "not reliable", counts the false alarms, and
checks docs/python.md's account of seeds 1-20 (seed 1 is the doc's own fit)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import gammaln

import ppl

ROOT = Path(__file__).resolve().parents[2]

CODE = """
data {
  int<lower=0> N;
  vector[N] dose;
  array[N] int<lower=0> deaths;
  array[N] int<lower=1> animals;
}
parameters { real alpha; real beta; }
model {
  alpha ~ normal(0, 5);
  beta ~ normal(0, 5);
  deaths ~ binomial_logit(animals, alpha + beta * dose);
}
generated quantities {
  vector[N] log_lik;
  array[N] int deaths_rep;
  for (n in 1:N) {
    log_lik[n] = binomial_logit_lpmf(deaths[n] | animals[n], alpha + beta * dose[n]);
    deaths_rep[n] = binomial_rng(animals[n], inv_logit(alpha + beta * dose[n]));
  }
}
"""
DOSE = np.array([-0.86, -0.30, -0.05, 0.73])
DEATHS = np.array([0, 1, 3, 5])
ANIMALS = np.array([5, 5, 5, 5])
DATA = {"N": 4, "dose": DOSE, "deaths": DEATHS, "animals": ANIMALS}
NAMES = ["alpha", "beta", *(f"log_lik[{i}]" for i in range(1, 5))]


def _log_lik(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    eta = a[..., None] + b[..., None] * DOSE
    return (gammaln(ANIMALS + 1) - gammaln(DEATHS + 1) - gammaln(ANIMALS - DEATHS + 1)
            + DEATHS * eta - ANIMALS * np.logaddexp(0, eta))  # fmt: skip


def grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """alpha, beta and the posterior mass of each cell of a grid that holds all but 1e-18."""
    a, b = np.meshgrid(np.linspace(-12, 15, 1081), np.linspace(-15, 40, 1101), indexing="ij")
    lp = -0.5 * (a / 5) ** 2 - 0.5 * (b / 5) ** 2 + _log_lik(a, b).sum(-1)
    w = np.exp(lp - lp.max())
    return a, b, w / w.sum()


def exact() -> dict[str, tuple[float, float]]:
    """Posterior mean and sd of alpha, beta and each log_lik by quadrature on the grid."""
    a, b, w = grid()
    log_lik = _log_lik(a, b)
    out = {}
    for name, f in zip(NAMES, [a, b, *np.moveaxis(log_lik, -1, 0)], strict=True):
        m = float(np.sum(w * f))
        out[name] = (m, float(np.sqrt(np.sum(w * (f - m) ** 2))))
    return out


def test_the_quadrature_is_the_posterior():
    ref = exact()
    assert ref["alpha"] == pytest.approx((0.5872, 0.7792), abs=2e-3)
    assert ref["beta"] == pytest.approx((6.357, 2.515), abs=5e-3)
    a, b, w = grid()
    for dose, skew in ((DOSE[0], -0.64), (DOSE[-1], 0.64)):  # docs/python.md: skewed tails
        eta = a + b * dose
        m = np.sum(w * eta)
        s = np.sqrt(np.sum(w * (eta - m) ** 2))
        assert np.sum(w * ((eta - m) / s) ** 3) == pytest.approx(skew, abs=0.01)


@pytest.mark.slow
def test_every_fit_that_is_not_good_is_called_not_reliable():
    """Seeds 1-20 of the default fit against the exact posterior, and docs/python.md's account
    of them (seed 1 is the doc's own fit)."""
    ref = exact()
    model = ppl.Model(CODE, "bioassay.stan")
    good, alarms, worst, first = [], [], 0.0, None
    for seed in range(1, 21):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = model.fit(DATA, seed=seed, quiet=True)
        table = fit.summary()
        errors = [abs(table.loc[n, "mean"] - m) / s for n, (m, s) in ref.items()]
        ratios = [table.loc[n, "sd"] / s for n, (m, s) in ref.items()]
        first = first or (fit.verdict, ratios)
        if max(errors) <= 0.1 and all(0.8 <= r <= 1.25 for r in ratios):
            good.append((seed, fit.verdict))
            alarms += [seed] if fit.verdict == "not reliable" else []
        else:
            assert fit.verdict == "not reliable", (seed, errors, ratios)
            worst = max(worst, *ratios)
    text = " ".join((ROOT / "docs" / "python.md").read_text().split())
    verdict, ratios = first
    assert verdict == "not reliable"
    assert f"`log_lik[4]`'s sd is {ratios[5]:.2f} times the exact one" in text
    assert max(ratios[:2]) <= 1.25 and min(ratios[:2]) >= 0.8  # "alpha's and beta's are good"
    assert (f"Over seeds 1-20, {20 - len(good)} fits had an sd more than 25% off the exact one "
            f"(up to {worst:.2f} times it)") in text  # fmt: skip
    assert alarms == [] and [s for s, _ in good] == [9] and good[0][1] == "usable"
    assert 'the one good fit (seed 9) was called "usable"' in text


@pytest.mark.slow
def test_the_tail_check_is_noisy_on_exact_draws():
    """1000 draws of the exact posterior: the sd check fires on some samples whose sds are
    accurate (docs/python.md: 11.5 % of 200, sds within 0.82-1.19 of exact in 95 %)."""
    from ppl.diagnostics.mcse_tail import SD_KHAT, tail_khats

    a, b, w = grid()
    ref = exact()
    sds = np.array([s for _, s in ref.values()])
    rng = np.random.default_rng(1000)
    step_a, step_b = a[1, 0] - a[0, 0], b[0, 1] - b[0, 0]
    fired, ratios = [], []
    for _ in range(200):
        cells = rng.choice(w.size, size=1000, p=w.ravel())
        al = a.ravel()[cells] + rng.uniform(-step_a / 2, step_a / 2, 1000)
        be = b.ravel()[cells] + rng.uniform(-step_b / 2, step_b / 2, 1000)
        y = np.column_stack([al, be, _log_lik(al, be)])
        fired.append(bool(np.any(tail_khats(y, mean=False)["sd"] > SD_KHAT)))
        ratios.append(y.std(axis=0, ddof=1) / sds)
    low, high = np.percentile(np.array(ratios), [2.5, 97.5], axis=0)
    assert 0.05 <= np.mean(fired) <= 0.2, np.mean(fired)
    assert low.min() >= 0.8 and high.max() <= 1.25, (low, high)


@pytest.mark.slow
def test_a_full_rank_gaussian_is_no_better_here():
    ref = exact()
    model = ppl.Model(CODE, "bioassay.stan")
    for seed in range(1, 11):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = model.fit(DATA, seed=seed, quiet=True, method="fullrank")
        ratios = [fit.summary().loc[n, "sd"] / s for n, (m, s) in ref.items()]
        assert max(ratios) > 1.25 and fit.verdict == "not reliable", (seed, ratios)
