"""Build parts/part-1.csv .. part-3.csv: simulated logistic regression rows (columns y, X.1..X.3)
split over three files, the example of `ppl fit --engine dask` (docs/dsvi.md).

    alpha = 0.3, beta = (1, -0.5, 0.25), X ~ N(0, I), y ~ Bernoulli(logit^-1(alpha + X beta))

Run from anywhere:  python models/logistic_regression/make_parts.py  (seeded: same files)
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROWS_PER_FILE, FILES = 2000, 3


def main() -> None:
    rng = np.random.default_rng(2026)
    beta = np.array([1.0, -0.5, 0.25])
    (HERE / "parts").mkdir(exist_ok=True)
    for i in range(1, FILES + 1):
        X = rng.standard_normal((ROWS_PER_FILE, len(beta)))
        y = (rng.random(ROWS_PER_FILE) < 1.0 / (1.0 + np.exp(-(0.3 + X @ beta)))).astype(int)
        lines = ["y,X.1,X.2,X.3"]
        lines += [f"{yi},{x[0]:.4f},{x[1]:.4f},{x[2]:.4f}" for yi, x in zip(y, X, strict=True)]
        (HERE / "parts" / f"part-{i}.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
