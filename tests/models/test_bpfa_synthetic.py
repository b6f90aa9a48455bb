"""benchmarks/bpfa_synthetic.py's scores (the readings of the paper's "predictive MSE"), its
paired seed differences, and the --gen-phi-var data, against closed forms."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
synth = runpy.run_path(str(ROOT / "benchmarks" / "bpfa_synthetic.py"), run_name="bench")


def test_scores_read_the_mse_three_ways():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(50, 4))
    hidden = rng.uniform(size=Y.shape) < 0.3
    mean, sd = np.array([0.5, 0.0, -1.0, 2.0]), np.array([2.0, 1.0, 0.5, 3.0])
    pred = rng.normal(size=Y.shape)  # on the standardised scale
    draw = rng.normal(size=Y.shape)
    out = synth["scores"](pred, [(draw, 4.0)], Y, hidden, mean, sd, sd)
    err = (pred * sd + mean - Y)[hidden]
    assert np.isclose(out["mse"], np.mean(err**2))
    assert np.isclose(out["mse_std"], np.mean((err / np.broadcast_to(sd, Y.shape)[hidden]) ** 2))
    # a draw's error plus the noise's variance 1 / gamma_obs, on Y's scale (sd^2 / 4)
    sd2 = np.broadcast_to(sd**2, Y.shape)[hidden]
    expected = np.mean(((draw * sd + mean - Y)[hidden]) ** 2) + np.mean(sd2) / 4.0
    assert np.isclose(out["mse_draw"], expected)
    # with the noise drawn: the same in expectation
    noisy = [np.mean(((draw * sd + mean + rng.normal(size=Y.shape) * sd / 2 - Y)[hidden]) ** 2)
             for _ in range(4000)]  # fmt: skip
    assert abs(np.mean(noisy) - expected) < 0.01 * expected
    assert "mse_draw" not in synth["scores"](pred, [], Y, hidden, mean, sd, sd)


def test_paired_differences_over_seeds():
    runs = [{"seed": s, "method": m, "mse": v} for s, m, v in [
        (1, "a", 1.0), (1, "b", 2.0), (2, "a", 3.0), (2, "b", 3.5), (3, "a", 5.0), (3, "b", 4.0),
        (4, "a", 9.0)]]  # fmt: skip
    out = synth["paired"](runs, "a", "b")["mse"]
    d = np.array([-1.0, -0.5, 1.0])  # seed 4 has no partner
    assert out["n"] == 3 and out["lower"] == 2
    assert np.isclose(out["mean"], d.mean())
    assert np.isclose(out["se"], d.std(ddof=1) / np.sqrt(3))


def test_gen_phi_var_rescales_phi_and_keeps_the_noise():
    Y1, M1, t1 = synth["make_data"](300, 10, 8, seed=3)
    Y2, M2, t2 = synth["make_data"](300, 10, 8, seed=3, phi_var=10.0)
    assert np.array_equal(M1, M2)
    np.testing.assert_allclose(t2.Phi, t1.Phi * 10.0)  # var 1 / D -> D: sd x D
    # the same Z, W and noise: Y2 - Y1 = (Z .* W) (Phi2 - Phi1), zero on rows with no atom
    empty = t1.atoms == 0
    np.testing.assert_allclose(Y2[empty], Y1[empty])
    assert not np.allclose(Y2[~empty], Y1[~empty])
