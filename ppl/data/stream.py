"""Read a CSV data file a chunk of rows at a time (``--stream``): memory is bounded by the chunk
size, whatever the size of the file.

One scan at the start reads every chunk through the same checks as a whole file (bad data is
reported before any fitting, with its row number in the file), counts the rows, records where
each chunk starts, and keeps a uniform random sample of the rows (the k smallest of independent
uniform keys) on which the ELBO is estimated. Later reads seek straight to a chunk.
The file must hold one row per line (no line breaks inside quoted fields).

For the default road, which sums every row at every pass, the scan also writes each chunk's
row columns as .npy files into a temporary folder (removed with the stream, and at exit):
reading them back costs a fraction of parsing the CSV again.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppl.data.csv_text import CsvText
from ppl.data.declaration import DataSpec
from ppl.data.files import load_data, open_data_file
from ppl.data.reading import file_error
from ppl.errors import DataError


@dataclass(frozen=True)
class Chunk:
    offset: int  # byte offset of its first line
    lines: int  # lines read (blank lines at the end of the file included)
    row0: int  # data rows of the file before it
    rows: int


def row_variables(specs: list[DataSpec], columns, path: str, option: str) -> tuple[str, list[str]]:
    """The size variable the file's rows count (the commonest first dimension of the data its
    columns give) and the data variables indexed by it."""
    leading = Counter(
        s.dims[0] for s in specs if s.name in columns and s.dims and isinstance(s.dims[0], str)
    )
    if not leading:
        raise DataError(
            f"{option}: no column of {path} gives a data variable whose first dimension is a "
            "size variable (like vector[N] y), so there are no rows to split"
        )
    rows_name = leading.most_common(1)[0][0]
    return rows_name, [s.name for s in specs if s.dims and s.dims[0] == rows_name]


class CsvStream:
    """One CSV file of rows, read in chunks, plus the other (small) data sources, read once."""

    def __init__(
        self,
        path: str,
        specs: list[DataSpec],
        other_paths: list[str],
        sets: dict[str, str],
        chunk_rows: int,
    ):
        if chunk_rows < 1:
            raise DataError(f"--chunk-rows must be at least 1, got {chunk_rows}")
        self.path, self.specs, self.chunk_rows = path, specs, int(chunk_rows)
        self.other_paths = list(other_paths)
        self.others = [open_data_file(p) for p in other_paths]
        try:
            with open(path, "rb") as f:
                header = b""
                while not header.replace(b",", b"").strip():
                    header = f.readline()
                    if not header:
                        raise DataError(f"{path}: the file is empty")
                self.data_start = f.tell()
        except OSError as e:
            raise file_error(path, e) from None
        self.header = self._decode(header, 1).rstrip("\r\n")
        columns = CsvText(path, self.header).vars
        self.rows_name, self.row_vars = row_variables(specs, columns, path, "--stream")
        self.given_rows = sets.get(self.rows_name)
        self.given_where = f"--set {self.rows_name}={self.given_rows}"
        for o, other in zip(self.others, other_paths, strict=True):
            given = getattr(o, "obj", None)  # the rows are counted in the file: a count given
            if isinstance(given, dict) and self.rows_name in given:  # beside it is checked
                self.given_rows = str(given.pop(self.rows_name))
                self.given_where = f"{other}: {self.rows_name} = {self.given_rows}"
        self.sets = {k: v for k, v in sets.items() if k != self.rows_name}
        self.chunks: list[Chunk] = []
        self.rows = 0
        self.binary: Path | None = None
        self._others: dict[str, np.ndarray] = {}

    def _decode(self, raw: bytes, line: int) -> str:
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line += raw[: e.start].count(b"\n")
            raise DataError(f"{self.path}: line {line}: the file is not UTF-8 text") from None

    def _values(self, raw_lines: list[bytes], row0: int, line: int) -> tuple[int, dict | None]:
        body = self._decode(b"".join(raw_lines), line)
        text = CsvText(self.path, self.header + "\n" + body, row0)
        if text.nrows == 0:
            return 0, None
        values = load_data(
            self.specs, [self.path, *self.other_paths], self.sets, opened=[text, *self.others]
        )
        return text.nrows, values

    def scan(
        self, keep: int, rng: np.random.Generator, binary: bool = False
    ) -> dict[str, np.ndarray]:
        """Check every chunk, count the rows, and return the data with `keep` random rows
        (`binary`: and keep each chunk's row columns for read_binary)."""
        if binary:
            self.binary = Path(tempfile.mkdtemp(prefix="ppl-stream-"))
            weakref.finalize(self, shutil.rmtree, str(self.binary), True)
        sample: dict[str, np.ndarray] = {}
        keys = np.zeros(0)
        ids = np.zeros(0, dtype=np.int64)
        values: dict | None = None
        line = 2  # the header is line 1 (leading blank lines are not counted)
        with open(self.path, "rb") as f:
            f.seek(self.data_start)
            while True:
                offset = f.tell()
                raw = list(itertools.islice(f, self.chunk_rows))
                if not raw:
                    break
                n, chunk_values = self._values(raw, self.rows, line)
                line += len(raw)
                if n == 0:
                    continue
                values = chunk_values
                if self.binary is not None:
                    for name in self.row_vars:
                        np.save(self.binary / f"{len(self.chunks)}-{name}.npy", values[name])
                self.chunks.append(Chunk(offset, len(raw), self.rows, n))
                keys = np.concatenate([keys, rng.random(n)])
                ids = np.concatenate([ids, np.arange(self.rows, self.rows + n)])
                for name in self.row_vars:
                    parts = [sample[name], values[name]] if name in sample else [values[name]]
                    sample[name] = np.concatenate(parts)
                if keys.size > keep:  # keep the rows with the `keep` smallest keys, in file order
                    chosen = np.sort(np.argpartition(keys, keep)[:keep])
                    keys, ids = keys[chosen], ids[chosen]
                    sample = {name: v[chosen] for name, v in sample.items()}
                self.rows += n
        if values is None:
            raise DataError(f"{self.path}: the file has a header but no rows")
        if self.given_rows is not None and self.given_rows.strip() != str(self.rows):
            raise DataError(
                f"{self.given_where}, but {self.path} has {self.rows} rows"
            )
        self._others = {k: v for k, v in values.items() if k not in self.row_vars}
        out = dict(values)
        out.update(sample)
        out[self.rows_name] = np.array(ids.size, dtype=np.int64)
        return out

    def read(self, chunk: Chunk) -> dict[str, np.ndarray]:
        """The data with this chunk's rows (checked already by `scan`)."""
        with open(self.path, "rb") as f:
            f.seek(chunk.offset)
            raw = list(itertools.islice(f, chunk.lines))
        n, values = self._values(raw, chunk.row0, 0)
        if n != chunk.rows:
            raise DataError(f"{self.path}: the file changed while it was being read")
        return values

    def read_binary(self, i: int) -> dict[str, np.ndarray]:
        """The data with the rows of chunk i, from the binary copy the scan made."""
        out = dict(self._others)
        for name in self.row_vars:
            out[name] = np.load(self.binary / f"{i}-{name}.npy")
        out[self.rows_name] = np.array(self.chunks[i].rows, dtype=np.int64)
        return out
