"""Model file + data on Dask workers -> CompiledModel on a sample of the rows, and the
partitions the workers hold."""

from __future__ import annotations

import numpy as np

from ppl.data.build import ELBO_ROWS
from ppl.data.specs import data_specs
from ppl.distributed.partitions import read_partitions
from ppl.language.frontend import load_model
from ppl.runtime.compiler import CompiledModel


def build_distributed(
    model_path: str, data_paths: list[str], sets: dict[str, str] | None, seed: int, client, *,
    keep: int = ELBO_ROWS,
):  # fmt: skip
    """The model on a uniform sample of `keep` rows of the CSV or Parquet files in `data_paths`
    (globs), and the files' partitions on the Dask workers of `client` (ppl.distributed)."""
    checked = load_model(model_path)
    data = read_partitions(client, checked, data_specs(checked), list(data_paths), sets or {})
    sample = data.sample(keep, np.random.default_rng([seed, 1]))
    return CompiledModel(checked, sample, seed), data
