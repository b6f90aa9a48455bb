"""local_means.csv: the per-row means of a fit's local latents, when `--method svi` keeps them as
means rather than draws (`--local-draws means`, or `auto` beyond its size: ppl.inference.
local_rows). Without it summary.csv and draws.csv hold the global latents only, and a CLI user
fitting BPFA at scale would get no per-row result at all.

One row per data row, `row__` first (1-based; `__` marks a column that is not a model variable,
as CmdStan's `lp__`), then each latent's elements within the row under CmdStan's names with the
row index left out, first index fastest: for `matrix[N, K] Z`, row n's column `Z.k` is
E[Z[n, k]]; for `vector[N] s`, column `s` is E[s[n]]. The mean of a binary latent times the slab
it switches is `Z*W.k` (E[Z[n, k] * W[n, k]], fit.local_means("Z .* W")). Values are the fit's
own (fit.local_means), written in full precision (float64: repr; float32, kept beyond 50
million values: the shortest text that reads back to the same float32). fit.json's
`local_means` says what each column holds and the file's shape.
"""

from __future__ import annotations

import os

import numpy as np

from ppl.outputs.stancsv import csv_names
from ppl.outputs.summary import element_indices

FILE = "local_means.csv"
ROW = "row__"
#: Values formatted at once (the text is made block by block of rows: numpy's strings of a
#: block take 128 bytes a value, Python's about 60 more; 4096 rows of BPFA's 750 took 1.2 GB).
_BLOCK = 200_000


def _kept(result) -> dict[str, np.ndarray]:
    """The per-row means the outputs should carry: only when the locals are not drawn."""
    vi = getattr(result, "vi", None)
    if not getattr(vi, "summarised", False):
        return {}
    return {k: np.asarray(v) for k, v in (getattr(vi, "local_means", None) or {}).items()}


def has_local_means(result) -> bool:
    """Whether the outputs include local_means.csv."""
    return bool(_kept(result))


def _label(key: str) -> tuple[str, str]:
    """(column label, latent whose shape names the columns) of a local_means key."""
    if " .* " in key:
        binary, slab = key.split(" .* ", 1)
        return f"{binary}*{slab}", binary
    return key, key


def _columns(result, key: str, width: int) -> tuple[list[str], np.ndarray, list]:
    """(column names, their positions in the row's values, per-row shape) of one key: the
    latent's per-row elements in Stan's order (first index fastest); the values are laid out
    row-major within a row."""
    label, base = _label(key)
    lat = next((x for x in result.model.latents if x.name == base), None)
    inner = tuple(lat.ushape[1:]) if lat is not None else (width,)
    if int(np.prod(inner, dtype=int)) != width:
        inner = (width,)
    if not inner:
        return [label], np.zeros(1, dtype=int), []
    order = [np.ravel_multi_index(tuple(i - 1 for i in ix), inner) for ix in element_indices(inner)]
    return csv_names(label, inner), np.asarray(order, dtype=int), list(inner)


def _layout(result, means: dict[str, np.ndarray]):
    """[(key, names, positions, per-row shape, (N, width) values)] in the fit's order."""
    out = []
    for key, x in means.items():
        x = x.reshape(x.shape[0], -1)
        names, order, inner = _columns(result, key, x.shape[1])
        out.append((key, names, order, inner, x))
    return out


def local_means_csv(result) -> bytes | None:
    """local_means.csv's bytes (module docstring), or None when the fit drew its locals (or
    has none): then draws.csv holds them."""
    return b"".join(local_means_parts(result)) if has_local_means(result) else None


def local_means_parts(result):
    """local_means.csv's bytes, made block by block of rows as they are consumed (at the paper's
    BPFA scale the file is about 1.8 GB: never whole in memory); nothing without local means."""
    means = _kept(result)
    if not means:
        return
    layout = _layout(result, means)
    header = [ROW] + [n for _, names, *_ in layout for n in names]
    N = layout[0][4].shape[0]
    yield (",".join(header) + "\n").encode()
    step = max(1, _BLOCK // len(header))
    for a in range(0, N, step):
        b = min(a + step, N)
        cols = [np.arange(a + 1, b + 1).astype(str)[:, None]]
        cols += [x[a:b][:, order].astype(str) for _, _, order, _, x in layout]
        text = np.concatenate(cols, axis=1)
        yield ("\n".join(",".join(r) for r in text.tolist()) + "\n").encode()


_LETTERS = "kjlm"


def _example(names: list[str], inner: list) -> str:
    """The generic column name (`Z.k`, `Z.k.j`, `s`) of a key's columns."""
    base = names[0].split(".")[0]
    return ".".join([base, *_LETTERS[: len(inner)]]) if inner else base


def _element(key: str, inner: list) -> str:
    """The Stan expression a column is the mean of: `Z[n, k]`, `Z[n, k] * W[n, k]`."""
    ix = ", ".join(["n", *_LETTERS[: len(inner)]])
    return " * ".join(f"{name}[{ix}]" for name in key.split(" .* "))


def local_means_record(result) -> dict | None:
    """fit.json's `local_means`: the file, its shape, and what each latent's columns hold."""
    means = _kept(result)
    if not means:
        return None
    layout = _layout(result, means)
    N = layout[0][4].shape[0]
    latents = {}
    for key, names, _, inner, _x in layout:
        what = f"row n's column {_example(names, inner)}: E[{_element(key, inner)}]"
        if " .* " in key:
            what += " (a binary latent times the slab it switches)"
        latents[key] = {"columns": [names[0], names[-1]], "count": len(names),
                        "shape": [N, *inner], "holds": what}  # fmt: skip
    return {
        "file": FILE,
        "rows": N,
        "columns": 1 + sum(len(names) for _, names, *_ in layout),
        "row_column": ROW,
        "holds": "each data row's local latents: their means over the Gibbs draws of the "
        "final pass at q's mean globals (the fit keeps no draws of them); columns named as "
        "CmdStan's without the row index, first index fastest; dtype "
        f"{'float32' if any(x.dtype == np.float32 for *_, x in layout) else 'float64'}",
        "latents": latents,
    }


def local_means_line(result, directory: str | None) -> str | None:
    """The console's line under `wrote ...` (what local_means.csv holds), or without --output
    where the per-row means would be."""
    record = local_means_record(result)
    if record is None:
        return None
    names = ", ".join(record["latents"])
    if not directory:
        return (f"local latents ({names}) kept as per-row means, not in the table: "
                f"{FILE} with --output DIR")  # fmt: skip
    return (f"local latents ({names}) kept as per-row means: {os.path.join(directory, FILE)}, "
            f"{record['rows']} rows x {record['columns']} columns (fit.json's local_means "
            "says what each column holds)")  # fmt: skip
