"""Shared driver of the NUTS reference scripts (epilepsy_nuts.py, gpfa_nuts.py).

Runs NumPyro NUTS in double precision, checks rank-normalised split R-hat and bulk ESS (the
diagnostics of pima_nuts.py, Vehtari et al. 2021) on every stored quantity, and writes the same
JSON layout as pima_nuts.py (mean, sd, rhat, ess, ess_tail keyed by Stan element names).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import numpyro  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from pima_nuts import diagnostics  # noqa: E402

from ppl.outputs.summary import flatten_draws  # noqa: E402

RHAT_MAX = 1.01


def run_reference(
    argv: list[str] | None,
    *,
    description: str,
    model: Callable,
    kwargs: dict,
    model_path: str,
    data_path: str,
    out: Path,
    command: str,
    defaults: dict,
    ess_min: float,
    derived: Callable[[dict], dict[str, np.ndarray]] | None,
    max_divergent_fraction: float = 0.0,
    notes: list[str] | None = None,
    rhat_max: float = RHAT_MAX,
    order: tuple[str, ...] | None = None,
) -> int:
    """Sample, check, write; 0 on success, 1 (and no file) when a check fails.

    `order`: the sample and deterministic sites to store, in this order (default: all, in
    NumPyro's order); ignored when `derived` is given.
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seed", type=int, default=defaults["seed"])
    ap.add_argument("--chains", type=int, default=defaults["chains"])
    ap.add_argument("--warmup", type=int, default=defaults["warmup"])
    ap.add_argument("--draws", type=int, default=defaults["draws"])
    ap.add_argument("--target-accept", type=float, default=defaults.get("target_accept", 0.9))
    ap.add_argument("--out", type=Path, default=out)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    mcmc = MCMC(
        NUTS(model, target_accept_prob=args.target_accept),
        num_warmup=args.warmup,
        num_samples=args.draws,
        num_chains=args.chains,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(args.seed), **kwargs)
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    divergences = int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum())
    wall = time.perf_counter() - t0

    C, S = args.chains, args.draws
    flat = {k: v.reshape((C * S,) + v.shape[2:]) for k, v in samples.items()}
    if derived is not None:
        quantities = derived(flat)
        names = list(quantities)
        matrix = np.column_stack([quantities[n] for n in names])
    else:
        names, matrix = flatten_draws({k: flat[k] for k in order} if order else flat)
    by_chain = matrix.reshape(C, S, -1)
    mean = matrix.mean(axis=0)
    sd = matrix.std(axis=0, ddof=1)
    diag = [diagnostics(by_chain[:, :, j]) for j in range(len(names))]

    print(f"numpyro {numpyro.__version__} NUTS, {C} chains x ({args.warmup} warmup + {S} draws), "
          f"target_accept_prob {args.target_accept}, seed {args.seed}, {wall:.1f} s, "
          f"{divergences} divergences")  # fmt: skip
    print(f"{'quantity':<14} {'mean':>10} {'sd':>9} {'rhat':>7} {'ess_bulk':>9} {'ess_tail':>9}")
    for j, name in enumerate(names):
        d = diag[j]
        print(f"{name:<14} {mean[j]:>10.4f} {sd[j]:>9.4f} {d['rhat']:>7.4f} "
              f"{d['ess_bulk']:>9.0f} {d['ess_tail']:>9.0f}")  # fmt: skip
    max_rhat = max(d["rhat"] for d in diag)
    min_ess = min(d["ess_bulk"] for d in diag)
    failures = [
        f"{name}: rhat {d['rhat']:.4f}, bulk ESS {d['ess_bulk']:.0f}"
        for name, d in zip(names, diag, strict=True)
        if not (d["rhat"] < rhat_max and d["ess_bulk"] > ess_min)
    ]
    allowed = int(max_divergent_fraction * C * S)
    if failures or divergences > allowed:
        print(f"FAILED: need rhat < {rhat_max} and bulk ESS > {ess_min:.0f} for every quantity "
              f"and at most {allowed} divergences ({divergences}): " + "; ".join(failures),
              file=sys.stderr)  # fmt: skip
        return 1

    invariance = [] if derived is None else [
        "quantities are permutation-invariant functions of the draws (the factors are "
        "exchangeable): see the `derived` function of the peer problem"
    ]  # fmt: skip
    reference = {
        "model": model_path,
        "data": data_path,
        "command": command,
        "argv": sys.argv,
        "sampler": f"numpyro {numpyro.__version__} NUTS",
        "sampler_version": {
            "numpyro": numpyro.__version__,
            "jax": jax.__version__,
            "python": platform.python_version(),
        },
        "settings": {
            "seed": args.seed,
            "chains": C,
            "warmup": args.warmup,
            "draws": S,
            "target_accept_prob": args.target_accept,
            "mass_matrix": "diagonal",
            "precision": "float64",
        },
        "diagnostics": {
            "rhat": "rank-normalised split R-hat, max of bulk and folded (Vehtari et al. 2021)",
            "ess": "bulk ESS: split, rank-normalised (Vehtari et al. 2021)",
            "max_rhat": max_rhat,
            "rhat_max_required": rhat_max,
            "min_ess_bulk": min_ess,
            "ess_min_required": ess_min,
            "divergences": divergences,
            "divergences_allowed": allowed,
            "wall_seconds": round(wall, 2),
        },
        "notes": list(notes or []) + invariance,
        "parameters": names,
        "mean": {n: float(v) for n, v in zip(names, mean, strict=True)},
        "sd": {n: float(v) for n, v in zip(names, sd, strict=True)},
        "rhat": {n: round(d["rhat"], 5) for n, d in zip(names, diag, strict=True)},
        "ess": {n: round(d["ess_bulk"], 1) for n, d in zip(names, diag, strict=True)},
        "ess_tail": {n: round(d["ess_tail"], 1) for n, d in zip(names, diag, strict=True)},
    }
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(reference, indent=1) + "\n")
    tmp.replace(args.out)
    print(f"max rhat {max_rhat:.4f}, min bulk ESS {min_ess:.0f}; wrote {args.out}")
    return 0
