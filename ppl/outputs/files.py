"""Output files: a fit's files appear together, each whole, or not at all, and never over a file
the fit read or one ppl did not write.

Where the output directory is ppl's own (it does not exist yet, or holds only files ppl wrote
there: a previous fit's outputs and `ppl plot`'s images), the new set is written in full to a
hidden sibling directory, which then takes the old one's place in one step (Linux: renameat2
RENAME_EXCHANGE; elsewhere two renames): a reader, or a kill -9 at any moment, sees the old set or
the new one, never a mix. The previous fit's images go with its set.

In a directory holding other files too (``--output .``, or the working directory), no directory
can be swapped without moving the user's files; there each file is written whole to a hidden
temporary file beside its target, the manifest is marked incomplete (it lists, per name, the
previous and the new file's digest), the files are renamed into place one after another with
SIGINT/SIGTERM held back, and the manifest is then rewritten complete. Each file is always whole;
only a kill -9 (or a crash) within those few renames can leave files of two fits side by side, and
the manifest then says so (``"complete": false``); the next write replaces them without
``--overwrite``.

The manifest ``.ppl-output.json`` records the SHA-256 of each file ppl wrote (the outputs and the
plots). A file of an output's or a plot's name that is not listed (or was changed since) is the
user's: it is replaced only with ``overwrite`` (``--overwrite``), and the error names it. A file
the fit read (model, data, checkpoint) is never replaced. Files get the modes an ordinary write
would (0666 less the umask). Temporary files and directories carry the writer's process id; the
ones a killed run left are removed by the next write, never read.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import shutil
import signal
import stat
import threading
from pathlib import Path

import numpy as np

from ppl import safefiles
from ppl.errors import PplError
from ppl.outputs.cmdstan_config import adaptation_lines, config_lines
from ppl.outputs.local_means import FILE as LOCAL_MEANS
from ppl.outputs.local_means import has_local_means, local_means_parts
from ppl.outputs.stancsv import csv_names
from ppl.outputs.summary import SUMMARY_HEADER, fit_summary, flatten_draws

#: The files of the last write_outputs that reached their places (for the interrupt message).
written_paths: list[Path] = []

#: The files a fit writes, and the manifest that says ppl wrote them.
NAMES = ("summary.csv", "draws.csv", "fit.json", "elbo.csv")
#: Written by a fit only when it has them (ppl.outputs.local_means); a previous fit's copy is
#: removed with the set it belonged to.
OPTIONAL = (LOCAL_MEANS,)
MANIFEST = ".ppl-output.json"
_FORMAT = "ppl-output/1"


def _signals_held():
    """Hold SIGINT and SIGTERM back while files are renamed (main thread, POSIX); they are
    delivered when released."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not \
            threading.main_thread():  # fmt: skip
        return lambda: None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    return lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | safefiles.NOFOLLOW | safefiles.NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listed(directory: str | os.PathLike) -> dict[str, list[str]]:
    """File name -> the digests the manifest allows for it (two, the previous and the new, while
    a write is under way); plain names in the directory only."""
    try:
        with open(Path(directory) / MANIFEST, "rb") as f:
            manifest = json.loads(f.read(1 << 20))
        listed = manifest["files"] if manifest.get("format") == _FORMAT else {}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
    if not isinstance(listed, dict):
        return {}
    out = {}
    for name, digests in listed.items():
        if os.path.basename(name) == name and name not in ("", ".", "..", MANIFEST):
            digests = digests if isinstance(digests, list) else [digests]
            out[name] = [d for d in digests if isinstance(d, str)]
    return out


def _ours(directory: str | os.PathLike) -> dict[str, str]:
    """The files in `directory` that ppl wrote and nobody changed since -> their digests."""
    found = {}
    for name, digests in _listed(directory).items():
        digest = _file_digest(Path(directory) / name)
        if digest in digests:
            found[name] = digest
    return found


def ppl_files(directory: str | os.PathLike) -> set[str]:
    """The files in `directory` (outputs, plots) that ppl wrote and nobody changed since."""
    return set(_ours(directory))


def complete(directory: str | os.PathLike) -> bool:
    """False when the last write into `directory` stopped between its renames (a kill -9):
    its files may then come from two fits."""
    try:
        with open(Path(directory) / MANIFEST, "rb") as f:
            return json.loads(f.read(1 << 20)).get("complete", True) is not False
    except (OSError, ValueError, AttributeError):
        return True


def check_output(directory: str, inputs: list[str] = (), overwrite: bool = False,
                 names: tuple[str, ...] = NAMES) -> str:  # fmt: skip
    """How the outputs `names` will go into `directory`: "new" (it does not exist), "swap" (it
    holds only ppl's outputs) or "files" (it holds other files too). PplError when an output
    would replace a file the fit read, or (without `overwrite`) one ppl did not write."""
    out = Path(directory)
    real = {os.path.realpath(p): p for p in inputs if p and os.path.lexists(p)}
    if os.path.realpath(out) in real:
        raise PplError(f"--output {directory} is one of the fit's inputs "
                       f"({real[os.path.realpath(out)]}); give another directory")  # fmt: skip
    for name in (*names, MANIFEST):
        if os.path.realpath(out / name) in real:
            raise PplError(f"--output {directory} would replace {out / name}, which this fit "
                           f"reads ({real[os.path.realpath(out / name)]}); give another "
                           "directory")  # fmt: skip
    if not os.path.lexists(out):
        return "new"
    if not out.is_dir():
        raise PplError(f"--output {directory} is not a directory")
    ours = ppl_files(out)
    foreign = [n for n in names if os.path.lexists(out / n) and n not in ours]
    if foreign and not overwrite:
        raise PplError(
            f"--output {directory} holds {', '.join(foreign)}, which ppl did not write (or which "
            f"changed since): {'they' if len(foreign) > 1 else 'it'} would be replaced; give "
            "another directory, or --overwrite to replace them"
        )
    try:
        entries = {e for e in os.listdir(out) if not e.endswith(".tmp")}
    except OSError as e:
        raise PplError(f"--output {directory}: cannot list it ({e.strerror})") from None
    cwd = os.path.realpath(os.curdir) == os.path.realpath(out)
    if not out.is_symlink() and not cwd and MANIFEST in entries and entries <= {*ours, MANIFEST}:
        return "swap"
    return "files"


class _Body:
    """A file's contents, hashed as they are written: bytes, or an iterable of bytes made while
    they are written (local_means.csv at scale: never whole in memory). Written once."""

    def __init__(self, data) -> None:
        self.data, self.sha = data, hashlib.sha256()

    def __iter__(self):
        for part in (self.data,) if isinstance(self.data, bytes) else self.data:
            self.sha.update(part)
            yield part

    @property
    def digest(self) -> str:
        return self.sha.hexdigest()


def _manifest(digests: dict[str, str], kept: dict[str, str] | None = None,
              previous: dict[str, str] | None = None) -> bytes:  # fmt: skip
    """The manifest of the new files (name -> digest) and of the files `kept`; with `previous`
    (the digests of the files they replace), the incomplete one written before the renames."""
    files: dict[str, str | list[str]] = dict(kept or {})
    for name, new in digests.items():
        old = (previous or {}).get(name)
        files[name] = [old, new] if old and old != new else new
    blob = {"format": _FORMAT, "complete": previous is None, "files": files}
    return (json.dumps(blob, indent=1) + "\n").encode()


def _write_dir(out: Path, texts: dict[str, _Body], how: str) -> None:
    """The whole set into a sibling directory, then put in `out`'s place in one step."""
    safefiles.remove_stale(out)
    tmp = Path(safefiles.temporary_dir(out))  # mode 0700 until it is whole
    try:
        for name, body in texts.items():
            safefiles.write_new(tmp / name, body)
        safefiles.write_new(tmp / MANIFEST, _manifest({n: b.digest for n, b in texts.items()}))
        mode = os.stat(out).st_mode & 0o7777 if how == "swap" else safefiles.default_mode(True)
        os.chmod(tmp, mode)
        release = _signals_held()
        try:
            if how == "new":
                os.rename(tmp, out)
            elif safefiles.exchange(tmp, out):
                pass  # tmp now holds the previous set
            else:
                old = Path(safefiles.temporary_dir(out))
                os.rename(out, old / "previous")
                os.rename(tmp, out)
                shutil.rmtree(old, ignore_errors=True)
        finally:
            release()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _write_files(out: Path, texts: dict[str, _Body], drop: tuple[str, ...] = ()) -> None:
    """Each file whole to a temporary file beside it; the manifest marked incomplete; all
    renamed into place; the manifest complete last. The other files ppl wrote there stay
    listed, but those named in `drop` (a previous fit's optional outputs this set lacks) are
    removed with the renames."""
    out.mkdir(parents=True, exist_ok=True)
    ours = _ours(out)
    gone = [name for name in drop if name in ours and name not in texts]
    kept = {name: digest for name, digest in ours.items() if name not in texts and name not in gone}
    temps: dict[Path, str] = {}
    try:
        for name, body in texts.items():
            safefiles.remove_stale(out / name)
            temps[out / name] = safefiles.temporary(out / name, body)
        digests = {name: body.digest for name, body in texts.items()}
        safefiles.remove_stale(out / MANIFEST)
        temps[out / MANIFEST] = safefiles.temporary(out / MANIFEST, _manifest(digests, kept))
        # a kill -9 between the renames below leaves this: both digests allowed, "complete":
        # false (a reader can tell; the next write replaces the files without --overwrite)
        safefiles.write_atomic(out / MANIFEST, _manifest(digests, kept, previous=ours))
        release = _signals_held()
        try:
            for path, tmp in temps.items():
                os.replace(tmp, path)
            for name in gone:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(out / name)
        finally:
            release()
    finally:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)


def write_all(directory: str, texts: dict, inputs: list[str] = (), overwrite: bool = False,
              drop: tuple[str, ...] = ()) -> list[Path]:  # fmt: skip
    """Write the files `texts` (name -> text, bytes, or an iterable of bytes made as they are
    written) into `directory` as one set (see the module); ppl's own files named in `drop` that
    the set lacks go (a previous fit's)."""
    out = Path(directory)
    how = check_output(directory, inputs, overwrite, (*NAMES, *(n for n in texts if n in OPTIONAL)))
    data = {name: _Body(text.encode("utf-8") if isinstance(text, str) else text)
            for name, text in texts.items()}  # fmt: skip
    try:
        if how == "files":
            _write_files(out, data, drop)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            _write_dir(out, data, how)
    except OSError as e:
        raise PplError(f"cannot write {out}: {e.strerror or e}") from None
    return [out / name for name in texts]


def write_images(directory: str, images: dict[str, bytes], inputs: list[str] = (),
                 overwrite: bool = False) -> list[Path]:  # fmt: skip
    """`ppl plot`'s images (name -> PNG bytes) into a fit's `directory` by the outputs' rule:
    never over a file in `inputs`, over a file ppl did not write only with `overwrite`; listed
    in the manifest, so that the next plot replaces them and the next fit takes them for ppl's."""
    out = Path(directory)
    real = {os.path.realpath(p): p for p in inputs if p and os.path.lexists(p)}
    for name in images:
        if os.path.realpath(out / name) in real:
            raise PplError(f"{out / name} is {real[os.path.realpath(out / name)]}, which this "
                           "command reads; it is not replaced")  # fmt: skip
    ours = ppl_files(out)
    foreign = [n for n in images if os.path.lexists(out / n) and n not in ours]
    if foreign and not overwrite:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5
                                          else "")  # fmt: skip
        raise PplError(
            f"{directory} holds {shown}, which ppl did not write (or which changed since): "
            f"{'they' if len(foreign) > 1 else 'it'} would be replaced by the plots; move "
            f"{'them' if len(foreign) > 1 else 'it'}, or give --overwrite to replace "
            f"{'them' if len(foreign) > 1 else 'it'}"
        )
    try:
        _write_files(out, {name: _Body(data) for name, data in images.items()})
    except OSError as e:
        raise PplError(f"cannot write the plots into {out}: {e.strerror or e}") from None
    return [out / name for name in images]


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


def draws_csv(result, log_weights: np.ndarray | None = None, info: dict | None = None) -> str:
    """draws.csv as CmdStan writes a variational fit's draws: lp__ (0: not computed for VI),
    log_p__ and log_g__ (the log density of the model and of q at each draw, on the
    unconstrained scale) first, then every element in Stan's order under CmdStan's name
    (`W.1.2`: ppl.outputs.stancsv), integers written as integers; with `log_weights` (--psis),
    a psis_log_weight__ column last (`__`: not a model variable, as CmdStan marks its own).
    With `info` (fit.json's record), CmdStan's `#` configuration lines around the header
    (ppl.outputs.cmdstan_config), which CmdStanPy's from_csv needs."""
    _, matrix = flatten_draws(result.draws)
    n = matrix.shape[0] if matrix.size else len(next(iter(result.draws.values()), []))
    diag = result.diagnostics
    columns = [np.zeros(n, dtype=np.int64)]
    for key in ("log_p", "log_q"):
        v = diag.get(key)
        columns.append(np.full(n, np.nan) if v is None or len(v) != n else np.asarray(v))
    names, ints = [], []
    for name, arr in result.draws.items():
        arr = np.asarray(arr)
        names += csv_names(name, arr.shape[1:])
        ints += [arr.dtype.kind in "iub"] * int(np.prod(arr.shape[1:], dtype=int))
    columns += [matrix[:, j].astype(np.int64) if is_int else matrix[:, j]
                for j, is_int in enumerate(ints)]  # fmt: skip
    header = ["lp__", "log_p__", "log_g__", *names]
    if log_weights is not None:
        header.append("psis_log_weight__")
        columns.append(np.asarray(log_weights, dtype=float))
    text = np.column_stack([c.astype(str) for c in columns]) if n else np.zeros((0, len(header)))
    lines = [",".join(header)] + [",".join(row) for row in text.tolist()]
    if info is not None:
        lines = [*config_lines(result, info), lines[0], *adaptation_lines(result), *lines[1:]]
    return "\n".join(lines) + "\n"


def write_outputs(
    directory: str,
    result,
    fit_info: dict,
    log_weights: np.ndarray | None = None,
    inputs: list[str] = (),
    overwrite: bool = False,
) -> list[Path]:
    """summary.csv, draws.csv, fit.json and elbo.csv under `directory`, and local_means.csv
    when the fit keeps its local latents as per-row means (ppl.outputs.local_means); with
    `log_weights` (--psis) the summary is importance-weighted and draws.csv gets a
    psis_log_weight__ column. None of them replaces a file in `inputs`, nor (without
    `overwrite`) one ppl did not write."""
    local = has_local_means(result)
    check_output(directory, inputs, overwrite, (*NAMES, *OPTIONAL[:local]))  # fail fast
    files: dict = {
        "summary.csv": _csv_text(SUMMARY_HEADER, fit_summary(result, log_weights)),
        "draws.csv": draws_csv(result, log_weights, fit_info),
        "fit.json": json.dumps(_json_safe(fit_info), indent=2, allow_nan=False) + "\n",
        "elbo.csv": _csv_text(["iteration", "elbo"], result.vi.elbo_trace),
    }
    if local:
        files[LOCAL_MEANS] = local_means_parts(result)  # made as it is written
    written_paths.clear()
    written = write_all(directory, files, inputs, overwrite, drop=OPTIONAL)
    written_paths.extend(written)
    return written
