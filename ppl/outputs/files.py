"""Output files: a fit's files appear together, each whole, or not at all. Every file is first
written in full to a hidden temporary file beside its target; only then are they renamed into
place, one after another with SIGINT/SIGTERM held back, so Ctrl-C can not leave old and new
files mixed. Temporary files are removed on every exit path a process controls, and ones a
killed process left behind are removed by the next write into the directory."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import tempfile
import threading
from pathlib import Path

import numpy as np

from ppl.errors import PplError
from ppl.outputs.summary import SUMMARY_HEADER, fit_summary, flatten_draws, scalar_names

#: The files of the last write_outputs that reached their places (for the interrupt message).
written_paths: list[Path] = []


def _temporary(path: Path, text: str) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _signals_held():
    """Hold SIGINT and SIGTERM back while files are renamed (main thread, POSIX); they are
    delivered when released."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not \
            threading.main_thread():  # fmt: skip
        return lambda: None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    return lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_all(texts: dict[Path, str]) -> list[Path]:
    """Write every file whole to a temporary file, then rename them all into place."""
    temps: dict[Path, str] = {}
    try:
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a killed run
                stale.unlink(missing_ok=True)
            temps[path] = _temporary(path, text)
        release = _signals_held()
        try:
            for path, tmp in temps.items():
                os.replace(tmp, path)
        finally:
            release()
    finally:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
    return list(texts)


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
        "summary.csv": _csv_text(SUMMARY_HEADER, fit_summary(result, log_weights)),
        "draws.csv": draws_csv(result, log_weights),
        "fit.json": json.dumps(_json_safe(fit_info), indent=2, allow_nan=False) + "\n",
        "elbo.csv": _csv_text(["iteration", "elbo"], result.vi.elbo_trace),
    }
    written_paths.clear()
    try:
        written = write_all({out / name: text for name, text in files.items()})
    except OSError as e:
        raise PplError(f"cannot write {out}: {e}") from None
    written_paths.extend(written)
    return written
