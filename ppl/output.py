"""Output files, each written whole or not at all (temporary file, then an atomic rename)."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ppl.errors import PplError
from ppl.summary import SUMMARY_HEADER, flatten_draws, scalar_names, summarise


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _csv_text(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow([repr(float(v)) if isinstance(v, float | np.floating) else v for v in row])
    return buf.getvalue()


def _json_safe(value):
    """Plain JSON: numpy scalars become numbers; NaN and the infinities, which JSON lacks, become
    the strings "NaN", "inf" and "-inf" (as Stan's JSON reader takes them), never null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def draws_csv(result, log_weights: np.ndarray | None = None) -> str:
    """draws.csv as CmdStan writes a variational fit's draws: lp__ (0: not computed for VI),
    log_p__ and log_g__ (the log density of the model and of q at each draw, on the
    unconstrained scale) first, then every scalar in Stan's order, integers written as integers;
    with `log_weights` (--psis), a psis_log_weight column last."""
    names, matrix = flatten_draws(result.draws)
    n = matrix.shape[0] if names else len(next(iter(result.draws.values()), []))
    diag = result.diagnostics
    columns = [np.zeros(n, dtype=np.int64)]
    for key in ("log_p", "log_q"):
        v = diag.get(key)
        columns.append(np.full(n, np.nan) if v is None or len(v) != n else np.asarray(v))
    ints = {s for name, arr in result.draws.items() if np.asarray(arr).dtype.kind in "iub"
            for s in scalar_names(name, np.asarray(arr).shape[1:])}  # fmt: skip
    columns += [matrix[:, j].astype(np.int64) if name in ints else matrix[:, j]
                for j, name in enumerate(names)]  # fmt: skip
    header = ["lp__", "log_p__", "log_g__", *names]
    if log_weights is not None:
        header.append("psis_log_weight")
        columns.append(np.asarray(log_weights, dtype=float))
    text = np.column_stack([c.astype(str) for c in columns]) if n else np.zeros((0, len(header)))
    lines = [",".join(header)] + [",".join(row) for row in text.tolist()]
    return "\n".join(lines) + "\n"


def write_outputs(
    directory: str, result, fit_info: dict, log_weights: np.ndarray | None = None
) -> list[Path]:
    """summary.csv, draws.csv, fit.json and elbo.csv under `directory`; with `log_weights`
    (--psis) the summary is importance-weighted and draws.csv gets a psis_log_weight column."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PplError(f"cannot create the output directory {directory}: {e}") from None
    files = {
        "summary.csv": _csv_text(SUMMARY_HEADER, summarise(result.draws, log_weights)),
        "draws.csv": draws_csv(result, log_weights),
        "fit.json": json.dumps(_json_safe(fit_info), indent=2, allow_nan=False) + "\n",
        "elbo.csv": _csv_text(["iteration", "elbo"], result.vi.elbo_trace),
    }
    written = []
    try:
        for name, text in files.items():
            write_atomic(out / name, text)
            written.append(out / name)
    except OSError as e:
        raise PplError(f"cannot write {out}: {e}") from None
    return written
