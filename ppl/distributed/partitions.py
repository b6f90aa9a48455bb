"""The data rows as a Dask DataFrame of CSV or Parquet files, one partition per file, each turned
into the model's data arrays on the worker that read it and kept there.

A partition goes through the same checks as a whole CSV file (ppl.data.files.load_data), so a bad
cell is reported with its file, row and column before any fitting; its transformed data are
computed on it, so they must act row by row (checked on the driver's sample of rows).
"""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppl.data.csv_text import CsvText
from ppl.data.declaration import DataSpec
from ppl.data.files import load_data, open_data_file
from ppl.data.specs import data_specs
from ppl.data.stream import row_variables
from ppl.errors import DataError, PplError
from ppl.language.checker import CheckedProgram, check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

ROW_FILES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}

_PROGRAMS: dict[str, CheckedProgram] = {}  # per worker process: the model parsed once


def program(source: str, model_path: str) -> CheckedProgram:
    """The checked model from its text (workers need not see the driver's files)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _PROGRAMS:
        _PROGRAMS[key] = check(parse(source, model_path))
    return _PROGRAMS[key]


def expand(paths: list[str]) -> tuple[list[str], list[str]]:
    """(files of rows, other data files): globs expanded, in sorted order."""
    files: list[str] = []
    for p in paths:
        matched = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matched:
            raise DataError(f"{p}: no file matches")
        files.extend(matched)
    rows = [f for f in files if Path(f).suffix.lower() in ROW_FILES]
    others = [f for f in files if f not in rows]
    if not rows:
        raise DataError(
            "--engine dask: no .csv or .parquet file among the data files; they hold the rows"
        )
    kinds = {ROW_FILES[Path(f).suffix.lower()] for f in rows}
    if len(kinds) > 1:
        raise DataError("--engine dask: the rows come in CSV or in Parquet files, not both")
    for f in others:
        if Path(f).suffix.lower() != ".json":
            raise DataError(
                f"{f}: under --engine dask the CSV or Parquet files hold the rows; give the "
                "other data in .json files or with --set"
            )
    for f in rows:
        if not Path(f).is_file():
            raise DataError(f"{f}: no such data file")
    return rows, others


class FrameTable(CsvText):
    """A pandas DataFrame (a partition) read as a CSV file is: same names, checks and messages."""

    def __init__(self, path: str, frame) -> None:
        self.path, self.row0, self.frame = path, 0, frame
        self.header = [str(c).strip() for c in frame.columns]
        self.ncol, self.nrows = len(self.header), len(frame)
        self._check_header()
        self._cache: dict[tuple[int, bool], np.ndarray] = {}

    def column(self, col: int, want_int: bool) -> np.ndarray:
        key = (col, want_int)
        if key in self._cache:
            return self._cache[key]
        series = self.frame.iloc[:, col]
        missing = np.flatnonzero(series.isna().to_numpy())
        if missing.size:
            raise self._cell_error(int(missing[0]), col, "")
        kind = series.dtype.kind
        if kind in "biuf":  # typed (Parquet): integers stay exact
            dtype = np.int64 if want_int and kind in "biu" else np.float64
            out = series.to_numpy(dtype=dtype)
        else:
            out = self._numbers([str(c) for c in series.tolist()], col, want_int)
        self._cache[key] = out
        return out


def to_model_data(
    frame, path: str, source: str, model_path: str, others: list, sets: dict, first: tuple
):  # fmt: skip
    """A partition as the model's data (declared and transformed), on the worker. Its columns
    must be the first file's (`first`: its path and columns), or sizes such as K could differ."""
    checked = program(source, model_path)
    columns = [str(c).strip() for c in frame.columns]
    if columns != list(first[1]):
        raise DataError(
            f"{path}: its columns ({', '.join(columns[:8])}{', ...' if len(columns) > 8 else ''})"
            f" are not those of {first[0]} ({', '.join(first[1][:8])}"
            f"{', ...' if len(first[1]) > 8 else ''}); every file of rows needs the same header"
        )
    if len(frame) == 0:
        return None  # a file with a header and no rows holds nothing (its N = 0 is no error)
    table = FrameTable(path, frame)
    paths = [path, *(o.path for o in others)]
    values = load_data(data_specs(checked), paths, sets, opened=[table, *others])
    return CompiledModel(checked, values).data


def _rows_in(part: dict | None, name: str) -> int:
    return 0 if part is None else int(np.shape(part[name])[0])


def _take(part: dict, rows: np.ndarray, row_vars: list[str], other_vars: list[str]) -> dict:
    out = {n: np.asarray(part[n])[rows] for n in row_vars}
    out.update({n: part[n] for n in other_vars})
    return out


@dataclass
class PartitionedData:
    """The futures of the partitions (one per file) and what the driver knows of them."""

    client: object
    files: list[str]
    parts: list  # futures of to_model_data's dicts, on the workers
    lengths: np.ndarray
    rows_name: str
    row_vars: list[str]
    data_vars: list[str]  # every declared data variable

    @property
    def rows(self) -> int:
        return int(self.lengths.sum())

    def sample(self, keep: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The declared data with a uniform sample of `keep` rows (all if fewer), gathered once:
        the driver's model, on which the ELBO is estimated."""
        m = min(keep, self.rows)
        chosen = np.sort(rng.choice(self.rows, m, replace=False))
        bounds = np.concatenate([[0], np.cumsum(self.lengths)])
        others = [n for n in self.data_vars if n not in self.row_vars]
        futures = []
        first = int(np.flatnonzero(self.lengths)[0])  # an empty file's partition is None
        for p, part in enumerate(self.parts):
            local = chosen[(chosen >= bounds[p]) & (chosen < bounds[p + 1])] - bounds[p]
            if local.size or p == first:
                futures.append(self.client.submit(_take, part, local, self.row_vars,
                                                  others if p == first else []))  # fmt: skip
        pieces = gather(self.client, futures)
        out = dict(pieces[0])
        for name in self.row_vars:
            out[name] = np.concatenate([piece[name] for piece in pieces])
        out[self.rows_name] = np.array(m, dtype=np.int64)
        return out


def gather(client, futures, files: list[str] | None = None):
    """client.gather, with a data error raised on a worker told as it is and anything else
    (an unreadable file, a lost cluster) told in one line, naming the files read."""
    try:
        return client.gather(futures)
    except PplError:
        raise
    except Exception as e:  # noqa: BLE001 - pandas, pyarrow, distributed: say what and where
        lines = [line for line in str(e).splitlines() if line.strip()]  # a binary file's: none
        first = f"{type(e).__name__}: {lines[0][:300]}" if lines else type(e).__name__
        where = f"{files[0]}{f' (or another of the {len(files)} files)' if len(files) > 1 else ''}"
        raise DataError(
            f"--engine dask: {where if files else 'a task'} could not be read or converted: "
            f"{first}{' (a binary file?)' if isinstance(e, UnicodeError) else ''}"
        ) from None


def read_partitions(
    client, checked: CheckedProgram, specs: list[DataSpec], paths: list[str], sets: dict
) -> PartitionedData:
    """Read and check the files on the workers; keep each partition where it was read."""
    import dask
    import dask.dataframe as dd

    files, other_paths = expand(paths)
    others = [open_data_file(p) for p in other_paths]
    try:
        if ROW_FILES[Path(files[0]).suffix.lower()] == "csv":
            frame = dd.read_csv(files, blocksize=None, dtype=str, keep_default_na=False,
                                na_filter=False)  # fmt: skip
        else:
            frame = dd.read_parquet(files, split_row_groups=False, blocksize=None)
    except (OSError, ValueError) as e:
        raise DataError(f"{files[0]}: cannot read the data files: {e}") from None
    import pandas as pd

    header = [str(c).strip() for c in frame.columns]
    columns = FrameTable(files[0], pd.DataFrame(columns=header)).vars
    rows_name, row_vars = row_variables(specs, columns, files[0], "--engine dask")
    given = sets.get(rows_name)
    sets = {k: v for k, v in sets.items() if k != rows_name}
    for o in others:  # the rows are counted in the files: a given count is checked, not used
        if rows_name in o.obj:
            given = str(o.obj.pop(rows_name))
    pieces = frame.to_delayed()
    if len(pieces) != len(files):
        raise DataError(f"--engine dask: {len(files)} files were read as {len(pieces)} parts")
    source, model_path = checked.program.source, checked.program.filename
    convert = dask.delayed(to_model_data, pure=True)
    parts = client.compute(
        [convert(piece, path, source, model_path, others, sets, (files[0], header))
         for piece, path in zip(pieces, files, strict=True)]
    )  # fmt: skip
    lengths = np.array(gather(client, client.map(_rows_in, parts, name=row_vars[0]), files))
    total = int(lengths.sum())
    if total == 0:
        raise DataError(f"--engine dask: the {len(files)} files have a header but no rows")
    if given is not None and given.strip() != str(total):
        raise DataError(f"{rows_name} = {given} was given, but the files have {total} rows")
    names = [s.name for s in specs]
    return PartitionedData(client, files, parts, lengths, rows_name, row_vars, names)
