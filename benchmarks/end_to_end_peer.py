"""One peer fit for benchmarks/end_to_end.py, in a fresh process: import, build, fit, summary.

    python benchmarks/end_to_end_peer.py TOOL PROBLEM [--data CSV] [--iter 10000] [--seed 1]
        [--draws 1000] [--warmup 1000] [--samples 1000]

TOOL: numpyro-svi (SVI, AutoNormal, Adam(0.01), Trace_ELBO, as benchmarks/peers.py's
numpyro-normal), numpyro-nuts (NUTS, one chain; --warmup / --samples), pymc-advi (pm.fit(n=iter,
method="advi"), PyMC's defaults, as peers.py's pymc-advi). PROBLEM: eight_schools,
breast_cancer, linreg20k (needs --data, the table of models/linear_regression/simulate.py). The
models are benchmarks/peer_problems' statements of the ppl models. NumPyro runs in double
precision, as in peers.py.

After the fit it prints a summary of --draws draws of the approximation (NUTS: its draws) as
each library's users would (numpyro.diagnostics.print_summary / MCMC.print_summary,
arviz.summary), then one line `E2E-RESULT {json}` with the seconds of each stage (imports,
building the model, fitting incl. compilation, the summary), the iterations and the gradient
evaluations (SVI and ADVI: one Monte Carlo draw per step; NUTS: leapfrog steps, warmup included).
It imports neither ppl nor anything else of the benchmark's but the problem statements.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("numpyro-svi", "numpyro-nuts", "pymc-advi")
PROBLEMS = ("eight_schools", "breast_cancer", "linreg20k")
NUMPYRO_STEP_SIZE = 0.01  # as benchmarks/peers.py


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool", choices=TOOLS)
    ap.add_argument("problem", choices=PROBLEMS)
    ap.add_argument("--data", type=Path, default=None, help="the linreg20k table")
    ap.add_argument("--iter", type=int, default=10000, help="SVI / ADVI steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000, help="draws for the summary")
    ap.add_argument("--warmup", type=int, default=1000, help="NUTS warmup iterations")
    ap.add_argument("--samples", type=int, default=1000, help="NUTS draws")
    return ap.parse_args(argv)


def the_problem(name: str, data: Path | None):
    sys.path.insert(0, str(ROOT))
    if name == "eight_schools":
        from benchmarks.peer_problems.eight_schools import problem

        return problem()
    if name == "breast_cancer":
        from benchmarks.peer_problems.breast_cancer import problem

        return problem()
    if data is None:
        raise SystemExit("linreg20k needs --data (models/linear_regression/simulate.py)")
    from benchmarks.peer_problems.linear_simulated import problem

    return problem(data)


def version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(name)
    except PackageNotFoundError:
        return None


def run_numpyro(problem, args, nuts: bool) -> dict:
    t0 = time.perf_counter()
    import jax
    import numpyro
    from numpyro.diagnostics import print_summary
    from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal
    from numpyro.optim import Adam

    numpyro.enable_x64()
    t1 = time.perf_counter()
    model, kwargs = problem.numpyro_model()
    key = jax.random.PRNGKey(args.seed)
    t2 = time.perf_counter()
    if nuts:
        mcmc = MCMC(NUTS(model), num_warmup=args.warmup, num_samples=args.samples,
                    num_chains=1, progress_bar=False)  # fmt: skip
        mcmc.warmup(key, collect_warmup=True, extra_fields=("num_steps",), **kwargs)
        steps = int(mcmc.get_extra_fields()["num_steps"].sum())
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("num_steps",), **kwargs)
        steps += int(mcmc.get_extra_fields()["num_steps"].sum())
        jax.block_until_ready(mcmc.get_samples())
        t3 = time.perf_counter()
        mcmc.print_summary()
        iterations, grads = args.warmup + args.samples, steps
    else:
        guide = AutoNormal(model)
        svi = SVI(model, guide, Adam(NUMPYRO_STEP_SIZE), Trace_ELBO())
        result = svi.run(key, args.iter, progress_bar=False, **kwargs)
        draws = guide.sample_posterior(
            jax.random.PRNGKey(args.seed + 1), result.params, sample_shape=(args.draws,), **kwargs
        )
        jax.block_until_ready(draws)
        t3 = time.perf_counter()
        print(f"SVI: {args.iter} steps, final loss {float(result.losses[-1]):.6g}")
        print_summary({k: v for k, v in draws.items()}, group_by_chain=False)
        iterations, grads = args.iter, args.iter  # Trace_ELBO(num_particles=1)
    t4 = time.perf_counter()
    return {
        "import_s": t1 - t0, "build_s": t2 - t1, "fit_s": t3 - t2, "summary_s": t4 - t3,
        "iterations": iterations, "grad_evals": grads,
        "versions": {n: version(n) for n in ("numpyro", "jax", "jaxlib")},
    }  # fmt: skip


def run_pymc(problem, args) -> dict:
    t0 = time.perf_counter()
    import arviz as az
    import pymc as pm

    t1 = time.perf_counter()
    model = problem.pymc_model()
    t2 = time.perf_counter()
    approx = pm.fit(n=args.iter, method="advi", random_seed=args.seed, model=model,
                    progressbar=False)  # fmt: skip
    idata = approx.sample(args.draws, random_seed=args.seed + 1)
    t3 = time.perf_counter()
    print(az.summary(idata, kind="stats").to_string())
    t4 = time.perf_counter()
    return {
        "import_s": t1 - t0, "build_s": t2 - t1, "fit_s": t3 - t2, "summary_s": t4 - t3,
        "iterations": args.iter, "grad_evals": args.iter,  # obj_n_mc = 1 draw per step
        "versions": {n: version(n) for n in ("pymc", "pytensor", "arviz")},
    }  # fmt: skip


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = the_problem(args.problem, args.data)
    if args.tool == "pymc-advi":
        out = run_pymc(problem, args)
    else:
        out = run_numpyro(problem, args, nuts=args.tool == "numpyro-nuts")
    out["tool"], out["problem"] = args.tool, args.problem
    out["python_s"] = time.perf_counter() - START
    out["versions"]["python"] = sys.version.split()[0]
    print("E2E-RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
