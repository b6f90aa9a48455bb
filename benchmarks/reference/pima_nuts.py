"""NUTS reference posterior for the Pima logistic regression (logistic_regression/pima.model).

Needs numpyro (with jax on CPU), an optional benchmark dependency that is not part of ppl's core.
Install it into a separate virtualenv outside the repository, then run from the repository root:

    python -m venv /tmp/nutsenv && /tmp/nutsenv/bin/pip install numpyro
    OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/nutsenv/bin/python benchmarks/reference/pima_nuts.py

The model is restated here in numpyro exactly as pima.model defines it: the seven predictors in
pima_train.csv (columns X.1..X.7) are standardised with the mean and the N-1 standard deviation over
the 200 rows, alpha ~ normal(0, 5), beta ~ normal(0, 2.5), y ~ bernoulli_logit(alpha + Z * beta).
NUTS runs in double precision, 4 chains of 2000 warmup + 5000 draws, target_accept_prob 0.9,
diagonal mass matrix, fixed seed. The script fails (exit status 1, no JSON written) unless every
parameter has rank-normalised split R-hat < 1.01 and bulk ESS > 1000 (Vehtari et al. 2021).

It writes models/logistic_regression/pima_nuts_reference.json: the command, sampler and version,
seed and run lengths, per-parameter mean, sd, R-hat and bulk ESS, and the 8 x 8 posterior
correlation and covariance matrices of (alpha, beta[1..7]) in that order. No raw draws are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from scipy.special import ndtri  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "models" / "logistic_regression"
DATA = FOLDER / "pima_train.csv"
OUT = FOLDER / "pima_nuts_reference.json"
COMMAND = (
    "OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/nutsenv/bin/python "
    "benchmarks/reference/pima_nuts.py"
)
RHAT_MAX = 1.01
ESS_MIN = 1000.0


def load() -> tuple[np.ndarray, np.ndarray]:
    """Read pima_train.csv and standardise the predictors as pima.model's transformed data does."""
    header = DATA.read_text().splitlines()[0].split(",")
    table = np.loadtxt(DATA, delimiter=",", skiprows=1, dtype=np.float64)
    if header[0] != "y" or header[1:] != [f"X.{k}" for k in range(1, len(header))]:
        raise ValueError(f"unexpected columns in {DATA}: {header}")
    y = table[:, 0].astype(np.int64)
    X = table[:, 1:]
    N = X.shape[0]
    x_mean = X.sum(axis=0) / N
    x_sd = np.sqrt(((X - x_mean) ** 2).sum(axis=0) / (N - 1))
    return (X - x_mean) / x_sd, y


def model(Z, y):
    alpha = numpyro.sample("alpha", dist.Normal(0.0, 5.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.5).expand([Z.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=alpha + Z @ beta), obs=y)


def mle(Z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Unpenalised maximum-likelihood logistic regression by Newton's method (sanity check)."""
    A = np.column_stack([np.ones(len(y)), Z])
    w = np.zeros(A.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-A @ w))
        step = np.linalg.solve(A.T @ (A * (p * (1 - p))[:, None]), A.T @ (y - p))
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return w


def _rank_normalise(x: np.ndarray) -> np.ndarray:
    """Rank-normalise (chains, draws) with the Blom offset, as in Vehtari et al. (2021)."""
    r = rankdata(x, method="average").reshape(x.shape)
    return ndtri((r - 0.375) / (x.size + 0.25))


def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, -half:]], axis=0)


def diagnostics(x: np.ndarray) -> dict:
    """Rank-normalised split R-hat (max of bulk, folded); bulk and tail ESS of (chains, draws)."""
    z = _rank_normalise(x)
    zf = _rank_normalise(np.abs(x - np.median(x)))
    rhat = max(float(split_gelman_rubin(z)), float(split_gelman_rubin(zf)))
    ess_bulk = float(effective_sample_size(_split(z)))
    q05, q95 = np.quantile(x, [0.05, 0.95])
    ess_tail = min(
        float(effective_sample_size(_split((x <= q05).astype(np.float64)))),
        float(effective_sample_size(_split((x <= q95).astype(np.float64)))),
    )
    return {"rhat": rhat, "ess_bulk": ess_bulk, "ess_tail": ess_tail}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20240607)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=5000)
    ap.add_argument("--target-accept", type=float, default=0.9)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    Z, y = load()
    K = Z.shape[1]
    names = ["alpha"] + [f"beta[{k}]" for k in range(1, K + 1)]

    t0 = time.perf_counter()
    kernel = NUTS(model, target_accept_prob=args.target_accept)
    mcmc = MCMC(
        kernel,
        num_warmup=args.warmup,
        num_samples=args.draws,
        num_chains=args.chains,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(args.seed), jnp.asarray(Z), jnp.asarray(y))
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    wall = time.perf_counter() - t0

    alpha = np.asarray(samples["alpha"])  # (chains, draws)
    beta = np.asarray(samples["beta"])  # (chains, draws, K)
    by_chain = np.concatenate([alpha[..., None], beta], axis=-1)  # (chains, draws, K + 1)
    flat = by_chain.reshape(-1, K + 1)
    divergences = int(np.asarray(extra["diverging"]).sum())

    mean = flat.mean(axis=0)
    sd = flat.std(axis=0, ddof=1)
    cov = np.cov(flat, rowvar=False)
    corr = np.corrcoef(flat, rowvar=False)
    diag = [diagnostics(by_chain[:, :, j]) for j in range(K + 1)]
    ml = mle(Z, y)

    print(f"numpyro {numpyro.__version__} NUTS, {args.chains} chains x ({args.warmup} warmup + "
          f"{args.draws} draws), target_accept_prob {args.target_accept}, seed {args.seed}, "
          f"{wall:.1f} s, {divergences} divergences")  # fmt: skip
    print(f"{'parameter':<10} {'mean':>9} {'sd':>8} {'rhat':>7} {'ess_bulk':>9} {'ess_tail':>9} "
          f"{'mle':>9}")  # fmt: skip
    for j, name in enumerate(names):
        d = diag[j]
        print(f"{name:<10} {mean[j]:>9.4f} {sd[j]:>8.4f} {d['rhat']:>7.4f} {d['ess_bulk']:>9.0f} "
              f"{d['ess_tail']:>9.0f} {ml[j]:>9.4f}")  # fmt: skip

    max_rhat = max(d["rhat"] for d in diag)
    min_ess = min(d["ess_bulk"] for d in diag)
    failures = [
        f"{name}: rhat {d['rhat']:.4f}, bulk ESS {d['ess_bulk']:.0f}"
        for name, d in zip(names, diag, strict=True)
        if not (d["rhat"] < RHAT_MAX and d["ess_bulk"] > ESS_MIN)
    ]
    if failures or divergences:
        print(
            f"FAILED: need rhat < {RHAT_MAX} and bulk ESS > {ESS_MIN:.0f} for every parameter and "
            f"no divergences ({divergences} divergences): " + "; ".join(failures),
            file=sys.stderr,
        )
        return 1

    reference = {
        "model": "models/logistic_regression/pima.model",
        "data": "models/logistic_regression/pima_train.csv",
        "command": COMMAND,
        "argv": sys.argv,
        "sampler": f"numpyro {numpyro.__version__} NUTS",
        "sampler_version": {
            "numpyro": numpyro.__version__,
            "jax": jax.__version__,
            "python": platform.python_version(),
        },
        "settings": {
            "seed": args.seed,
            "chains": args.chains,
            "warmup": args.warmup,
            "draws": args.draws,
            "target_accept_prob": args.target_accept,
            "mass_matrix": "diagonal",
            "precision": "float64",
        },
        "diagnostics": {
            "rhat": "rank-normalised split R-hat, max of bulk and folded (Vehtari et al. 2021)",
            "ess": "bulk ESS: split, rank-normalised (Vehtari et al. 2021)",
            "max_rhat": max_rhat,
            "min_ess_bulk": min_ess,
            "divergences": divergences,
            "wall_seconds": round(wall, 2),
        },
        "parameters": names,
        "mean": {n: float(v) for n, v in zip(names, mean, strict=True)},
        "sd": {n: float(v) for n, v in zip(names, sd, strict=True)},
        "rhat": {n: round(d["rhat"], 5) for n, d in zip(names, diag, strict=True)},
        "ess": {n: round(d["ess_bulk"], 1) for n, d in zip(names, diag, strict=True)},
        "ess_tail": {n: round(d["ess_tail"], 1) for n, d in zip(names, diag, strict=True)},
        "mle": {n: float(v) for n, v in zip(names, ml, strict=True)},
        "correlation": [[round(float(v), 6) for v in row] for row in corr],
        "covariance": [[float(f"{v:.8g}") for v in row] for row in cov],
    }
    args.out.write_text(json.dumps(reference, indent=1) + "\n")
    print(f"max rhat {max_rhat:.4f}, min bulk ESS {min_ess:.0f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
