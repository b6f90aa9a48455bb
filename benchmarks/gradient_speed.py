"""Time the compiled log joint: milliseconds per value and per value+gradient call.

For every posteriordb model (models/posteriordb/*/ with data.json) and the example models in
models/*/, builds the compiled model and times `log_joint(zeta)` on S unconstrained draws
(default S = 10), alone and with its gradient (autograd's `make_vjp`, as ADVI does each step).

    python benchmarks/gradient_speed.py [--draws 10] [--seconds 0.5] [--only NAME]
                                        [--save FILE.json] [--compare FILE.json]

`--save` writes the timings as JSON; `--compare` adds the saved timings and the speed-up
(saved / now) as extra columns, for before/after tables.

    python benchmarks/gradient_speed.py --hand [--draws 10] [--seconds 0.5]

`--hand` times instead five models against their log joints written by hand in numpy + autograd
(benchmarks/hand_written.py: an ordered-logistic loop with if/else, hmm_example's forward
algorithm, a 20,000-row linear regression, eight schools, 100 varying intercepts), after checking
that both give the same values, and prints ppl's time per value+gradient over the hand-written one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from autograd import make_vjp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ppl.data.build import build  # noqa: E402

MODELS = ROOT / "models"

# example models and their data (models/README.md)
EXAMPLES = [  # (name, folder, model file, data file)
    ("eight_schools/noncentered", "eight_schools", "noncentered.model", "eight_schools.json"),
    ("eight_schools/centered", "eight_schools", "centered.model", "eight_schools.json"),
    ("linear_regression", "linear_regression", "linear_regression.model", "boston.csv"),
    ("logistic_regression/pima", "logistic_regression", "pima.model", "pima_train.csv"),
    ("epilepsy/poisson_gamma", "epilepsy", "poisson_gamma.model", "epil.json"),
]


def cases() -> list[tuple[str, str, list[str]]]:
    out = []
    for folder in sorted((MODELS / "posteriordb").iterdir()):
        if (folder / "model.stan").exists() and (folder / "data.json").exists():
            out.append((folder.name, str(folder / "model.stan"), [str(folder / "data.json")]))
    for name, folder, model, data in EXAMPLES:
        out.append((name, str(MODELS / folder / model), [str(MODELS / folder / data)]))
    return out


def _time(fn, seconds: float) -> float:
    """Milliseconds per call: the best of several batches filling about `seconds` in all."""
    fn()  # warm-up (devectorisation decisions, caches)
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    per_batch = max(1, int(seconds / 5 / once))
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(per_batch):
            fn()
        best = min(best, (time.perf_counter() - start) / per_batch)
    return best * 1e3


def measure(model_path: str, data: list[str], draws: int, seconds: float) -> dict:
    model = build(model_path, data, seed=0)
    rng = np.random.default_rng(1)
    zeta = rng.uniform(-2, 2, size=(draws, model.dim))
    g = np.ones(draws)

    def value():
        return model.log_joint(zeta)

    def value_and_grad():
        vjp, lp = make_vjp(model.log_joint)(zeta)
        return lp, vjp(g)

    return {
        "dim": model.dim,
        "value_ms": _time(value, seconds),
        "grad_ms": _time(value_and_grad, seconds),
    }


def _time_pair(first, second, seconds: float, rounds: int = 7) -> tuple[float, float]:
    """Milliseconds per call of each, timed in alternating batches (best batch of each): a load
    that comes and goes on a shared machine then falls on both alike."""
    per_batch = []
    for fn in (first, second):
        fn()  # warm-up
        start = time.perf_counter()
        fn()
        per_batch.append(
            max(1, int(seconds / (2 * rounds) / max(time.perf_counter() - start, 1e-6)))
        )
    best = [np.inf, np.inf]
    for _ in range(rounds):
        for i, fn in enumerate((first, second)):
            start = time.perf_counter()
            for _ in range(per_batch[i]):
                fn()
            best[i] = min(best[i], (time.perf_counter() - start) / per_batch[i])
    return best[0] * 1e3, best[1] * 1e3


def _value_and_grad(fn, zeta):
    g = np.ones(zeta.shape[0])

    def run():
        vjp, lp = make_vjp(fn)(zeta)
        return lp, vjp(g)

    return run


def against_hand(draws: int, seconds: float) -> None:
    """ppl's compiled log joint against the hand-written one, per value+gradient call."""
    import hand_written

    from ppl.language.checker import check
    from ppl.language.parser import parse
    from ppl.runtime.compiler import CompiledModel

    head = f"{'model':34} {'D':>4} {'ppl ms':>9} {'numpy ms':>9} {'ratio':>6}"
    print(f"S = {draws}; milliseconds per log joint + gradient (autograd make_vjp)")
    print(head)
    print("-" * len(head))
    for make in hand_written.CASES:
        case = make()
        data = {k: np.asarray(v) for k, v in case.data.items()}
        model = CompiledModel(check(parse(case.source, case.name)), data)
        zeta = np.random.default_rng(1).normal(scale=0.7, size=(draws, model.dim))
        ours, theirs = model.log_joint(zeta), case.hand(zeta)
        if not np.allclose(ours, theirs, rtol=1e-9):
            raise SystemExit(f"{case.name}: the hand-written log joint differs from ppl's")
        ppl_ms, hand_ms = _time_pair(
            _value_and_grad(model.log_joint, zeta), _value_and_grad(case.hand, zeta), seconds
        )
        print(
            f"{case.name:34} {model.dim:>4} {ppl_ms:>9.2f} {hand_ms:>9.2f}"
            f" {ppl_ms / hand_ms:>6.2f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10, help="S, draws per call (default 10)")
    ap.add_argument("--seconds", type=float, default=0.5, help="time budget per measurement")
    ap.add_argument("--only", default=None, help="run only models whose name contains this")
    ap.add_argument("--save", default=None, help="write the timings to this JSON file")
    ap.add_argument("--compare", default=None, help="JSON file of earlier timings to compare")
    ap.add_argument("--hand", action="store_true", help="six models against hand-written numpy")
    args = ap.parse_args()
    if args.hand:
        against_hand(args.draws, args.seconds)
        return
    before = json.loads(Path(args.compare).read_text()) if args.compare else {}
    results = {}
    head = f"{'model':34} {'D':>4} {'value ms':>9} {'grad ms':>9}"
    if before:
        head += f" {'before value':>12} {'before grad':>11} {'x value':>7} {'x grad':>7}"
    print(f"S = {args.draws}")
    print(head)
    print("-" * len(head))
    for name, model_path, data in cases():
        if args.only and args.only not in name:
            continue
        r = measure(model_path, data, args.draws, args.seconds)
        results[name] = r
        line = f"{name:34} {r['dim']:>4} {r['value_ms']:>9.2f} {r['grad_ms']:>9.2f}"
        b = before.get(name)
        if b:
            line += (
                f" {b['value_ms']:>12.2f} {b['grad_ms']:>11.2f}"
                f" {b['value_ms'] / r['value_ms']:>7.1f} {b['grad_ms'] / r['grad_ms']:>7.1f}"
            )
        print(line, flush=True)
    if before:
        common = [n for n in results if n in before]
        if common:
            ratio = {
                k: [before[n][k] / results[n][k] for n in common] for k in ("value_ms", "grad_ms")
            }
            gv, gg = (float(np.exp(np.mean(np.log(ratio[k])))) for k in ("value_ms", "grad_ms"))
            print(f"geometric mean speed-up: value x{gv:.2f}, gradient x{gg:.2f}")
    if args.save:
        Path(args.save).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
