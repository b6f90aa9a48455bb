"""Compile once, fit many datasets: the per-fit overhead of the Python API.

    python benchmarks/api_overhead.py [--problem eight_schools|poisson] [--fits 20] [--seed 1]

A notebook user compiles a model once (`ppl.Model`) and fits it to many datasets. This prints,
per fit, where the time of `model.fit(data)` goes, as medians over --fits datasets simulated from
the model's prior predictive (fixed seeds):

- data: reading and checking the data (dict -> the data block's arrays);
- setup: the compiled log joint on the data (transformed data, the latents' layout);
- fit: the variational fit with everything it does (the optimisation, `auto`'s richer
  candidates, PSIS k-hat on 1000 draws of q, the constrained draws);
- wrap: the Fit object (summaries are computed when asked for).

The per-fit overhead is data + setup + wrap, the part a compile-once API exists to keep small
(target < 20 ms), printed beside parsing + checking the model again (what the API saves per fit)
and the imports, which a notebook pays once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POISSON = """
data { int<lower=0> N; vector[N] x; array[N] int<lower=0> y; }
parameters { real a; real b; }
model { a ~ normal(0, 2); b ~ normal(0, 2); y ~ poisson_log(a + b * x); }
"""


def datasets(problem: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        if problem == "eight_schools":
            sigma = np.array([15, 10, 16, 11, 9, 11, 10, 18.0])
            theta = rng.normal(5, abs(rng.standard_cauchy()) % 10 + 1, size=8)
            yield {"J": 8, "y": rng.normal(theta, sigma), "sigma": sigma}
        else:
            x = rng.normal(size=200)
            yield {"N": 200, "x": x, "y": rng.poisson(np.exp(0.3 + 0.7 * x))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problem", choices=["eight_schools", "poisson"], default="eight_schools")
    p.add_argument("--fits", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    start = time.perf_counter()
    import ppl
    from ppl.api import Fit
    from ppl.pipeline import fit as run_fit
    from ppl.runtime.compiler import CompiledModel

    imports = time.perf_counter() - start
    path = ROOT / "models" / "eight_schools" / "noncentered.model"
    start = time.perf_counter()
    if args.problem == "eight_schools":
        model = ppl.Model.from_file(path)
        code, name = path.read_text(), str(path)
    else:
        model = ppl.Model(POISSON, "poisson.stan")
        code, name = POISSON, "poisson.stan"
    compile_s = time.perf_counter() - start

    rows = []
    for data in datasets(args.problem, args.fits, args.seed):
        t0 = time.perf_counter()
        values = model.data(data)
        t1 = time.perf_counter()
        compiled = CompiledModel(model.checked, values, args.seed)
        t2 = time.perf_counter()
        result = run_fit(compiled, "auto", seed=args.seed)
        t3 = time.perf_counter()
        Fit(result, model=name, data=["the data dict"], iterations=10000)
        t4 = time.perf_counter()
        rows.append({"data": t1 - t0, "setup": t2 - t1, "fit": t3 - t2, "wrap": t4 - t3,
                     "evals": result.vi.grad_evals})  # fmt: skip
    start = time.perf_counter()
    for _ in range(5):
        ppl.Model(code, name)
    reparse = (time.perf_counter() - start) / 5

    def ms(key: str) -> float:
        return 1000 * statistics.median(r[key] for r in rows)

    overhead = [1000 * (r["data"] + r["setup"] + r["wrap"]) for r in rows]
    print(f"problem: {args.problem}, {args.fits} datasets, medians per fit (ms)")
    print(f"{'data':>8}{'setup':>8}{'wrap':>8}{'overhead':>10}{'fit':>10}{'grad evals':>12}")
    print(f"{ms('data'):8.2f}{ms('setup'):8.2f}{ms('wrap'):8.2f}"
          f"{statistics.median(overhead):10.2f}{ms('fit'):10.1f}"
          f"{statistics.median(r['evals'] for r in rows):12.0f}")  # fmt: skip
    verdict = "met" if statistics.median(overhead) < 20 else "NOT met"
    print(f"per-fit overhead (data + setup + wrap): max {max(overhead):.2f} ms; target < 20 ms: "
          f"{verdict}")  # fmt: skip
    print(f"once per session: imports {1000 * imports:.0f} ms, parse + check {1000 * compile_s:.0f}"
          f" ms (again, as a fit without a compiled model would: {1000 * reparse:.1f} ms)")


if __name__ == "__main__":
    main()
