"""NUTS reference for gamma_normal.model on liver.json, and a fit's errors against it.

Needs numpyro and jax (the `bench` extra). From the repository root:

    OPENBLAS_NUM_THREADS=1 python models/gamma_normal/nuts_reference.py            # ~100 s CPU
    python models/gamma_normal/nuts_reference.py --compare out/summary.csv        # a fit's errors

NumPyro NUTS in double precision, 2 chains of 1000 warmup + 3000 draws (seed 1). The L factors
are exchangeable: each chain settles on one labelling, so the second chain's factors are
permuted onto the first's (the permutation closest in W's means) before pooling, and a fit is
compared under the permutation of its factors closest to the reference. Writes
gamma_normal_nuts_reference.json next to this file: mean and sd of every W[l,j], x[n,l] and
sigma (Stan's names), and the run's settings.

Measured (2026-11-27): the chains agree to 0.02 in W's means after the permutation; the
posterior is far from the mode of the unconstrained density (W's entries about +-0.5 where the
mode has +-2.4; sigma 0.741 against 0.613): a factor model's scale ridges, along which most of
the mass lies away from the mode.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "gamma_normal_nuts_reference.json"


def sample(seed: int, chains: int, warmup: int, draws: int) -> dict[str, np.ndarray]:
    """NUTS draws by chain: W (C, S, L, J), x (C, S, N, L), sigma (C, S)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")  # fmt: skip
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    data = json.loads((HERE / "liver.json").read_text())
    y, N, J, L = jnp.asarray(np.array(data["y"], float)), data["N"], data["J"], data["L"]

    def model(y):
        W = numpyro.sample("W", dist.Normal(0, 1).expand([L, J]).to_event(2))
        x = numpyro.sample("x", dist.Gamma(1.0, 1.0).expand([N, L]).to_event(2))
        sigma = numpyro.sample("sigma", dist.Gamma(1.0, 1.0))
        numpyro.sample("y", dist.Normal(x @ W, sigma).to_event(2), obs=y)

    mcmc = MCMC(NUTS(model, target_accept_prob=0.9), num_warmup=warmup, num_samples=draws,
                num_chains=chains, chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.PRNGKey(seed), y)
    return {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}


def closest_permutation(reference_W: np.ndarray, W: np.ndarray) -> list[int]:
    """The order of W's rows (factors) closest to reference_W's."""
    L = len(W)
    return list(min(itertools.permutations(range(L)),
                    key=lambda p: float(np.abs(W[list(p)] - reference_W).sum())))  # fmt: skip


def pooled(samples: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Means and sds with every chain's factors permuted onto the first chain's."""
    W, x, sigma = samples["W"].copy(), samples["x"].copy(), samples["sigma"]
    for c in range(1, len(W)):
        p = closest_permutation(W[0].mean(axis=0), W[c].mean(axis=0))
        W[c], x[c] = W[c][:, p], x[c][:, :, p]
    W, x = W.reshape((-1,) + W.shape[2:]), x.reshape((-1,) + x.shape[2:])
    s = sigma.reshape(-1)
    return {"W": (W.mean(0), W.std(0)), "x": (x.mean(0), x.std(0)),
            "sigma": (np.array(s.mean()), np.array(s.std()))}  # fmt: skip


def stan_names(moments) -> tuple[dict, dict]:
    mean, sd = {}, {}
    for name in ("W", "x"):
        m, s = moments[name]
        for i, j in itertools.product(range(m.shape[0]), range(m.shape[1])):
            mean[f"{name}[{i + 1},{j + 1}]"], sd[f"{name}[{i + 1},{j + 1}]"] = float(m[i, j]), \
                float(s[i, j])  # fmt: skip
    mean["sigma"], sd["sigma"] = float(moments["sigma"][0]), float(moments["sigma"][1])
    return mean, sd


def compare(summary: Path, reference: dict) -> str:
    """A fit's summary.csv against the reference, its factors permuted to the closest labelling:
    the largest and median |mean error| in reference sds and the range of sd ratios, per
    parameter."""
    with open(summary) as f:
        rows = {r[next(iter(r))]: (float(r["mean"]), float(r["sd"])) for r in csv.DictReader(f)}
    L, J = np.shape(reference["W_mean"])
    W = np.array([[rows[f"W[{i + 1},{j + 1}]"] for j in range(J)] for i in range(L)])
    p = closest_permutation(np.array(reference["W_mean"]), W[..., 0])
    lines = []
    for name in ("W", "x", "sigma"):
        errors, ratios = [], []
        for key, m in reference["mean"].items():
            if key != name and not key.startswith(name + "["):
                continue
            if name == "sigma":
                fitted = rows[key]
            else:
                a, b = (int(v) for v in key[len(name) + 1 : -1].split(","))
                # the reference's factor k is the fit's factor p[k - 1]
                mine = f"W[{p[a - 1] + 1},{b}]" if name == "W" else f"x[{a},{p[b - 1] + 1}]"
                fitted = rows[mine]
            errors.append(abs(fitted[0] - m) / reference["sd"][key])
            ratios.append(fitted[1] / reference["sd"][key])
        lines.append(f"{name}: max |mean error| {max(errors):.2f} sd, median "
                     f"{np.median(errors):.2f}; sd ratio [{min(ratios):.2f}, "
                     f"{np.median(ratios):.2f}, {max(ratios):.2f}]")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=3000)
    ap.add_argument("--samples", type=Path, help="an .npz of NUTS draws (W, x, sigma by chain)")
    ap.add_argument("--compare", type=Path, help="a fit's summary.csv to compare")
    args = ap.parse_args(argv)
    if args.compare is not None:
        print(compare(args.compare, json.loads(OUT.read_text())))
        return 0
    start = time.process_time()
    if args.samples is not None:
        samples = dict(np.load(args.samples))
    else:
        samples = sample(args.seed, args.chains, args.warmup, args.draws)
    moments = pooled(samples)
    mean, sd = stan_names(moments)
    OUT.write_text(json.dumps({
        "model": "models/gamma_normal/gamma_normal.model",
        "data": "models/gamma_normal/liver.json",
        "sampler": "numpyro NUTS, float64, target_accept_prob 0.9",
        "settings": {"seed": args.seed, "chains": args.chains, "warmup": args.warmup,
                     "draws": args.draws},
        "cpu_seconds": None if args.samples else round(time.process_time() - start, 1),
        "W_mean": moments["W"][0].tolist(),
        "mean": mean,
        "sd": sd,
    }, indent=0) + "\n")  # fmt: skip
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
