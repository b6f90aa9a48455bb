"""The synthetic study of Shah, Knowles & Ghahramani (2015), sec. 5.1: BPFA data from its prior,
held-out predictive MSE and time per iteration for Gibbs-SSVI, MF-SSVI and a Gibbs sampler.

Data: the prior with K = 80 true atoms, D = 40, gamma_w = 1, gamma_obs = 100 and the paper's
a = b = 10 (pi_k ~ Beta(a / K, b (K - 1) / K): about one atom per row; --gen-a for denser rows),
N = 1e5 rows (--N); 7.5% of the entries held out uniformly at random (the paper does not say
entries or rows; entries let every row's latents be inferred). Every method fits K = 150 atoms
from a random start on the rest, as the paper's sec. 5: the data standardised to mean 0 and
variance 1 (--raw: not), gamma_obs ~ Gamma(1, 10) (--d0), gamma_w ~ Gamma(1, 1), a = b = 10,
rho_t = t^-0.75 (--tau0). Held-out MSE = mean squared error of E[(z_i .* w_i) Phi] on the
data's scale at the hidden entries of --eval-rows fixed rows (the paper: Gibbs-SSVI 0.022 +-
0.002, MF-SSVI 0.027 +- 0.004, Gibbs sampler 0.020 +- 0.002; 1.5, 0.6 and 7.6 s per
iteration). The noise alone gives MSE 0.01. Seconds are CPU seconds (--wall-clock: not).

Methods: `gibbs-ssvi`, `mf-ssvi`, `mf-svi`, `gibbs` (benchmarks/bpfa_gibbs.py: numpy, written
out for BPFA), `ppl-gibbs`, `ppl-meanfield` (ppl's generic `svi`, when this ppl has it),
`oracle-gibbs`, `oracle-mf` (each local step at the true globals).

    python benchmarks/bpfa_synthetic.py --seeds 1 --time-budget 60 --gibbs-budget 120 --json a.json
    python benchmarks/bpfa_synthetic.py --merge a.json b.json --json both.json
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ref = runpy.run_path(str(HERE / "bpfa_gibbs.py"), run_name="bpfa_gibbs")
LABEL = {"gibbs-ssvi": "gibbs", "mf-ssvi": "mf-ssvi", "mf-svi": "mf-svi"}


class CpuClock:
    """`time` for the references with perf_counter = this process's CPU seconds: the machine is
    shared, so wall seconds would measure the other jobs (OPENBLAS_NUM_THREADS=1: one thread)."""

    perf_counter = staticmethod(time.process_time)


def make_data(N: int, D: int, K: int, seed: int, ab: float = 10.0, held: float = 0.075,
              gen_a: float | None = None, phi_var: float | None = None):  # fmt: skip
    """(Y, observed mask, truth): prior data (a = b = `ab`; a = `gen_a` if given, for denser
    rows: K a / (a + b (K - 1)) atoms per row) with `held` of the entries hidden; truth = the
    globals that made it (for the `oracle-*` diagnostics). `phi_var`: the variance of Phi's
    entries if not the paper's 1 / D (its "N(0, D^-1 I)" read with D^-1 as a precision: D)."""
    rng = np.random.default_rng(seed)
    a = ab if gen_a is None else gen_a
    Y, Z, W, Phi, pi = ref["prior_draw"](N, D, K, rng, a=a, b=ab, gamma_w=1.0, gamma_obs=100.0)
    if phi_var is not None:  # the same draws, Phi rescaled
        scale = np.sqrt(phi_var * D)
        Y = Y + (Z * W) @ (Phi * (scale - 1))
        Phi = Phi * scale
    truth = ref["Globals"](Phi, np.clip(pi, 1e-300, 1 - 1e-16), 1.0, 100.0)
    truth.atoms = Z.sum(1)  # atoms per row
    return Y, rng.uniform(size=Y.shape) >= held, truth


def standardise(Y: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y scaled, column means, column sds) from the observed entries: the paper transforms
    every data set to empirical mean 0 and variance 1 (sec. 5); MSE is reported on Y's scale."""
    n = M.sum(0)
    mean = np.where(M, Y, 0.0).sum(0) / n
    sd = np.sqrt(np.where(M, (Y - mean) ** 2, 0.0).sum(0) / n)
    return (Y - mean) / sd, mean, sd


def run_oracle(kind: str, Y, M, truth, rows, rng) -> np.ndarray:
    """E[(z_i .* w_i) Phi] of `rows` with the globals fixed at the truth: what each local
    approximation gives when the globals are exact (long chains: 20 + 40 sweeps, or 30 sweeps)."""
    Yr, Mr = Y[rows], M[rows]
    if kind == "gibbs":
        K = len(truth.pi)
        Z0, W0 = np.zeros((len(rows), K), bool), rng.normal(size=(len(rows), K))
        _, L = ref["gibbs_stats"](Yr, Mr, Z0, W0, truth, rng, 20, 40)
    else:
        lp = np.log(truth.pi) - np.log1p(-truth.pi)
        _, L = ref["meanfield_local"](Yr, Mr, truth, truth.Phi**2, lp, rng, 30)
    return L @ truth.Phi


def meanfield_draw(Y, M, g, rng: np.random.Generator, sweeps: int = 5) -> np.ndarray:
    """One draw of Z .* W from the mean-field local q (q(z_ik) q(w_ik) by coordinate ascent
    given the globals `g`, as bpfa_gibbs.meanfield_local with a global draw: MF-SSVI's)."""
    B, K = len(Y), g.Phi.shape[0]
    Mf = M.astype(float)
    theta, m, v = np.full((B, K), 0.5), np.zeros((B, K)), np.full((B, K), 1 / g.gamma_w)
    El = theta * m
    R = np.where(M, Y - El @ g.Phi, 0.0)
    S2 = Mf @ (g.Phi**2).T
    logit_pi = np.log(g.pi) - np.log1p(-g.pi)
    for _ in range(sweeps):
        for k in range(K):
            phi = g.Phi[k]
            h = R @ phi + El[:, k] * S2[:, k]
            prec = g.gamma_w + g.gamma_obs * theta[:, k] * S2[:, k]
            m[:, k], v[:, k] = g.gamma_obs * theta[:, k] * h / prec, 1 / prec
            t = logit_pi[k] + g.gamma_obs * (
                m[:, k] * h - 0.5 * (m[:, k] ** 2 + v[:, k]) * S2[:, k]
            )
            theta[:, k] = 1 / (1 + np.exp(-t))
            new = theta[:, k] * m[:, k]
            R -= Mf * np.outer(new - El[:, k], phi)
            El[:, k] = new
    Z = rng.uniform(size=(B, K)) < theta
    return Z * (m + rng.standard_normal((B, K)) * np.sqrt(v))


def predictive_draws(Y, M, q, Z, W, kind: str, rng, n: int) -> list:
    """`n` draws (Z .* W) Phi of the rows' predictive (eq. 12: the globals drawn from q, then
    the local variables from the method's local q, a Gibbs chain from the row's last state:
    3 burn-in sweeps), each with its gamma_obs: [(fit, gamma_obs)]."""
    out = []
    for _ in range(n):
        g = q.draw(rng)
        if kind == "gibbs":
            _, L = ref["gibbs_stats"](Y, M, Z.copy(), W.copy(), g, rng, 3, 1)
        else:
            L = meanfield_draw(Y, M, g, rng)
        out.append((L @ g.Phi, g.gamma_obs))
    return out


def scores(pred: np.ndarray, draws: list, Y, hidden, mean, sd, sd_data) -> dict:
    """The held-out scores of one checkpoint (hidden entries of the evaluation rows): `mse`,
    the posterior predictive mean's squared error on Y's scale (the headline); `mse_std`, the
    same on the standardised scale (errors divided by the columns' sds `sd_data`); `mse_draw`,
    the expected squared error of a predictive draw y* = f + noise (f a draw of
    (z .* w) Phi, noise of variance 1 / gamma_obs, its part added in expectation), averaged
    over `draws`."""
    sd_b = np.broadcast_to(sd, Y.shape)[hidden]
    err = (pred * sd + mean - Y)[hidden]
    std_err = err / np.broadcast_to(sd_data, Y.shape)[hidden]
    out = {"mse": float(np.mean(err**2)), "mse_std": float(np.mean(std_err**2))}
    if draws:
        d = [np.mean(((f * sd + mean - Y)[hidden]) ** 2) + np.mean(sd_b**2) / go for f, go in draws]
        out["mse_draw"] = float(np.mean(d))
    return out


def run_method(method: str, Y, M, truth, args, rng) -> dict:
    """One fit; its held-out scores (`scores`: on Y's scale, at the hidden entries of the
    evaluation rows) at checkpoints of training seconds, and per iteration."""
    curve = []
    ev = args.eval
    hidden = ~M[ev]
    Yf, mean, sd = standardise(Y, M) if args.standardise else (Y, 0.0, 1.0)
    sd_data = standardise(Y, M)[2]
    sampler_draws: list = []

    def monitor(label, seconds, iteration, pred):
        pred, draws = pred if isinstance(pred, tuple) else (pred, sampler_draws)
        pred = pred if len(pred) == len(ev) else pred[ev]
        point = {"seconds": seconds, "iteration": iteration,
                 **scores(pred, draws, Y[ev], hidden, mean, sd, sd_data)}  # fmt: skip
        curve.append(point)
        extra = "".join(f"  {k} {point[k]:.4f}" for k in ("mse_draw", "mse_std") if k in point)
        print(f"    {label}: it {iteration:>6} {seconds:8.1f} s  held-out MSE {point['mse']:.4f}"
              f"{extra}", flush=True)  # fmt: skip
        if args.progress:
            Path(args.progress).write_text(json.dumps({"method": method, "seed": args.seed,
                                                       "curve": curve}) + "\n")  # fmt: skip

    def sampler_state(it, L, g):
        sampler_draws[:] = [(L[ev] @ g.Phi, g.gamma_obs)]

    if method.startswith("oracle-"):
        start = time.process_time()
        pred = run_oracle(method.removeprefix("oracle-"), Y, M, truth, ev, rng)
        seconds = time.process_time() - start
        sd, mean = 1.0, 0.0  # the oracle works on Y's own scale
        monitor(method, seconds, 1, pred)
    elif method == "gibbs":
        ref["gibbs_sampler"](Yf, M, args.K, iterations=args.gibbs_iterations, rng=rng,
                             burnin=args.gibbs_burnin, a=args.ab, b=args.ab,
                             monitor=monitor, every=args.gibbs_every, state=sampler_state,
                             time_budget=args.gibbs_budget or args.time_budget)  # fmt: skip
    elif method.startswith("ppl-"):
        run_ppl(method, Yf, M, args, monitor)
    else:
        local = LABEL[method]
        kind = "gibbs" if local == "gibbs" else "mf"

        def predict(q, Z, W):
            pred = ref["predict_rows"](Yf[ev], M[ev], q, Z[ev], W[ev], rng=rng, burnin=3,
                                       samples=5, local=kind)  # fmt: skip
            draws = predictive_draws(Yf[ev], M[ev], q, Z[ev], W[ev], kind, rng, args.draws)
            return pred, draws

        ref["svi"](Yf, M, args.K, local=local, batch=args.batch, iterations=args.max_iter,
                   rng=rng, a=args.ab, b=args.ab, monitor=monitor, every=args.every,
                   predict=predict, time_budget=args.time_budget, tau0=args.tau0,
                   kappa=args.kappa)  # fmt: skip
    if not curve:
        return {}
    last = curve[-1]
    return {
        **{k: v for k, v in last.items() if k.startswith("mse")},
        "seconds": last["seconds"],
        "iterations": last["iteration"],
        "seconds_per_iteration": last["seconds"] / last["iteration"],
        "curve": curve,
    }


def run_ppl(method: str, Y, M, args, monitor) -> None:
    """ppl's `svi` on the per-row BPFA model, refitted with growing iteration caps."""
    bp = runpy.run_path(str(HERE / "bpfa_ppl.py"), run_name="bpfa_ppl")
    for n in args.ppl_iterations:
        start = time.process_time()
        out = bp["fit_predict"](Y, M, args.K, local=method.removeprefix("ppl-"), batch=args.batch,
                                iterations=n, seed=args.seed, ab=args.ab)  # fmt: skip
        if out is None:
            print(f"    {method}: this ppl has no `svi` method or no per-row BPFA model; skipped")
            return
        pred, seconds, _ = out
        seconds = time.process_time() - start if args.cpu_clock else seconds  # with its draws
        monitor(method, seconds, n, pred)
        if seconds > args.time_budget:
            return


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--D", type=int, default=40)
    ap.add_argument("--K-true", type=int, default=80)
    ap.add_argument("--K", type=int, default=150)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--ab", type=float, default=10.0, help="beta-process a = b (paper: 10)")
    ap.add_argument("--gen-a", type=float, help="the data's a (not the paper's: a sensitivity)")
    ap.add_argument("--gen-phi-var", type=float, help="the data's var(Phi_kd) (paper: 1 / D)")
    ap.add_argument("--methods", nargs="+", default=["gibbs-ssvi", "mf-ssvi", "gibbs"])
    ap.add_argument("--time-budget", type=float, default=300.0, help="training s per method")
    ap.add_argument("--max-iter", type=int, default=10**7)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--gibbs-iterations", type=int, default=200)
    ap.add_argument("--gibbs-budget", type=float, help="the Gibbs sampler's (default: the same)")
    ap.add_argument("--gibbs-every", type=int, default=10)
    ap.add_argument("--gibbs-burnin", type=int, default=10, help="sweeps before averaging")
    ap.add_argument("--ppl-iterations", type=int, nargs="+", default=[100, 300, 1000, 3000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--kappa", type=float, default=0.75, help="rho_t = (t + tau0)^-kappa")
    ap.add_argument("--tau0", type=float, default=0.0, help="the paper: rho_t = t^-0.75")
    ap.add_argument(
        "--raw",
        dest="standardise",
        action="store_false",
        help="fit on Y's own scale (the paper standardises every data set)",
    )
    ap.add_argument(
        "--d0",
        type=float,
        default=10.0,
        help="gamma_obs ~ Gamma(1, d0): the paper's d = 10 (bpfa_gibbs.py's D0: 0.01)",
    )
    ap.add_argument(
        "--wall-clock",
        dest="cpu_clock",
        action="store_false",
        help="time in wall seconds (default: CPU seconds of this process)",
    )
    ap.add_argument(
        "--eval-rows",
        type=int,
        default=5000,
        help="held-out MSE over the hidden entries of this many fixed random rows",
    )
    ap.add_argument(
        "--checkpoints",
        type=float,
        nargs="+",
        default=[30, 60, 120, 300],
        help="training seconds at which the MSEs are also compared",
    )
    ap.add_argument("--draws", type=int, default=3, help="predictive draws for `mse_draw`")
    ap.add_argument("--progress", help="rewrite this file with the curve at every checkpoint")
    ap.add_argument("--json")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="pool these stored runs (one seed each) into --json, and stop",
    )
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.merge:
        merge(args.json, args.merge, args.checkpoints)
        return 0
    ref["svi"].__globals__["D0"] = args.d0  # the references read D0 from their module
    if args.cpu_clock:
        ref["svi"].__globals__["time"] = CpuClock
    runs = []
    for seed in args.seeds:
        args.seed = seed
        Y, M, truth = make_data(args.N, args.D, args.K_true, seed, args.ab, gen_a=args.gen_a,
                                phi_var=args.gen_phi_var)  # fmt: skip
        order = np.random.default_rng(seed + 1000).permutation(args.N)
        args.eval = np.sort(order[: args.eval_rows])
        # a held-out whole row has no observed entry: every method predicts it by the prior
        # predictive mean, the observed column means (the standardised scale's 0)
        col_mean = np.where(M, Y, 0.0).sum(0) / M.sum(0)
        mse_rows = float(np.mean((Y - col_mean)[args.eval][~M[args.eval]] ** 2))
        print(
            f"seed {seed}: N = {args.N}, D = {args.D}, {args.K_true} true atoms, K = {args.K}; "
            f"{(~M).sum()} held-out entries ({(~M[args.eval]).sum()} scored); zero predictor MSE "
            f"{np.mean(Y[~M] ** 2):.4f}; atoms per row {truth.atoms.mean():.2f} "
            f"(rows with none {np.mean(truth.atoms == 0):.2f}, max {truth.atoms.max()})"
        )
        for method in args.methods:
            start = time.perf_counter()
            out = run_method(method, Y, M, truth, args, np.random.default_rng(seed))
            if out:
                wall = time.perf_counter() - start
                runs.append(
                    {"seed": seed, "method": method, **out, "mse_rows": mse_rows, "wall": wall}
                )
    summary = summarise(runs, args.methods, args.checkpoints)
    if args.json:
        stored = {k: v for k, v in vars(args).items() if k != "eval"}
        text = json.dumps({"args": stored, "summary": summary, "runs": runs}, indent=1)
        Path(args.json).write_text(text + "\n")
    return 0


def at_time(curve: list[dict], seconds: float) -> float:
    """The held-out MSE at the last checkpoint within `seconds` of training (nan if none)."""
    before = [c["mse"] for c in curve if c["seconds"] <= seconds]
    return before[-1] if before else float("nan")


def summarise(runs: list[dict], methods: list[str], checkpoints: list[float]) -> dict:
    """Per method: MSE mean and sd over seeds at the end, s / iteration, and the mean MSE at
    equal training times (`at`, by checkpoint seconds); printed as a table."""
    print(f"\n{'method':<16}{'held-out MSE':>16}{'s / iteration':>15}{'iterations':>12}"
          + "".join(f"{f'at {t:g} s':>10}" for t in checkpoints))  # fmt: skip
    summary = {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        if not mine:
            continue
        mse = np.array([r["mse"] for r in mine])
        spi = float(np.mean([r["seconds_per_iteration"] for r in mine]))
        at = {f"{t:g}": float(np.mean([at_time(r["curve"], t) for r in mine])) for t in checkpoints}
        summary[method] = {
            "mse_mean": float(mse.mean()),
            "mse_sd": float(mse.std()),
            "seconds_per_iteration": spi,
            "runs": len(mine),
            "at": at,
        }
        for score in ("mse_draw", "mse_std", "mse_rows"):
            if all(score in r for r in mine):
                summary[method][f"{score}_mean"] = float(np.mean([r[score] for r in mine]))
        print(f"{method:<16}{mse.mean():>9.4f} +- {mse.std():.4f}{spi:>15.3f}"
              f"{int(np.mean([r['iterations'] for r in mine])):>12}"
              + "".join(f"{v:>10.4f}" for v in at.values()))  # fmt: skip
    pair = paired(runs, "gibbs-ssvi", "mf-ssvi")
    if pair:
        summary["paired"] = pair
        print("Gibbs-SSVI - MF-SSVI over seeds: " + "; ".join(
            f"{k} {v['mean']:+.5f} +- {v['se']:.5f} (lower in {v['lower']}/{v['n']})"
            for k, v in pair.items()))  # fmt: skip
    return summary


def paired(runs: list[dict], first: str, second: str) -> dict:
    """Per score, `first` - `second` over the seeds both were run on: mean, standard error
    (sd / sqrt(n)), n, and in how many seeds `first` was the lower."""
    by = {(r["seed"], r["method"]): r for r in runs}
    seeds = sorted(s for s, m in by if m == first and (s, second) in by)
    out = {}
    for score in ("mse", "mse_draw", "mse_std"):
        d = np.array([by[s, first][score] - by[s, second][score] for s in seeds
                      if score in by[s, first] and score in by[s, second]])  # fmt: skip
        if len(d) > 1:
            se = float(d.std(ddof=1) / np.sqrt(len(d)))
            out[score] = {"mean": float(d.mean()), "se": se, "n": len(d),
                          "lower": int((d < 0).sum())}  # fmt: skip
    return out


def merge(out: str, inputs: list[str], checkpoints: list[float]) -> None:
    """One stored run from several (seeds run side by side, or methods added later): runs pooled,
    a later input's run of the same (seed, method) replacing an earlier one; summary anew."""
    parts = [json.loads(Path(f).read_text()) for f in inputs]
    runs = {(r["seed"], r["method"]): r for p in parts for r in p["runs"]}
    methods = list(dict.fromkeys(m for p in parts for m in p["args"]["methods"]))
    seeds = sorted({seed for seed, _ in runs})
    args = dict(parts[0]["args"], seeds=seeds, methods=methods, json=out, checkpoints=checkpoints,
                ppl_iterations=parts[-1]["args"]["ppl_iterations"])  # fmt: skip
    summary = summarise(list(runs.values()), methods, checkpoints)
    text = json.dumps({"args": args, "summary": summary, "runs": list(runs.values())}, indent=1)
    Path(out).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
