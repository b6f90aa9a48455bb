"""Model file + data -> CompiledModel: in memory, or on a sample of a streamed CSV (on Dask:
ppl.distributed.build)."""

from __future__ import annotations

import numpy as np

from ppl.data.specs import data_specs, read_data
from ppl.errors import DataError
from ppl.language.frontend import load_model
from ppl.runtime.compiler import CompiledModel

#: Under minibatches the ELBO is estimated on a fixed sample of this many rows (or 2 B).
ELBO_ROWS = 10_000


def build(
    model_path: str, data_paths: list[str], sets: dict[str, str] | None = None, seed: int = 0
) -> CompiledModel:
    checked = load_model(model_path)
    data = read_data(checked, data_paths, sets)
    return CompiledModel(checked, data, seed)


def build_streamed(
    model_path: str,
    data_paths: list[str],
    sets: dict[str, str] | None = None,
    seed: int = 0,
    *,
    chunk_rows: int = 20000,
    keep: int = ELBO_ROWS,
    binary: bool = False,
):
    """The model on a uniform sample of `keep` rows of the one CSV in `data_paths`, and the
    stream (ppl.data.stream) that reads that file a chunk at a time for --stream (`binary`: and
    keeps a binary copy of every chunk, read back at every pass of the default road)."""
    from ppl.data.stream import CsvStream

    checked = load_model(model_path)
    csvs = [p for p in data_paths if p.lower().endswith(".csv")]
    if len(csvs) != 1:
        raise DataError(
            f"--stream reads the rows from one CSV file; {len(csvs)} were given"
            + (f" ({', '.join(csvs)})" if csvs else "")
        )
    others = [p for p in data_paths if p != csvs[0]]
    stream = CsvStream(csvs[0], data_specs(checked), others, sets or {}, chunk_rows)
    sample = stream.scan(keep, np.random.default_rng([seed, 1]), binary=binary)
    return CompiledModel(checked, sample, seed), stream
