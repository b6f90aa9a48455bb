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
from ppl.summary import SUMMARY_HEADER, flatten_draws, summarise


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
    """Plain JSON: numpy scalars become numbers, NaN and infinities become null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


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
    names, matrix = flatten_draws(result.draws)
    if log_weights is not None:
        names, matrix = [*names, "psis_log_weight"], np.column_stack([matrix, log_weights])
    files = {
        "summary.csv": _csv_text(SUMMARY_HEADER, summarise(result.draws, log_weights)),
        "draws.csv": _csv_text(names, matrix.tolist()),
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
