"""A data CSV file parsed: its header (``x``, ``X.1.2`` or ``X[1,2]`` name the columns of a
variable), where each cell is, and numeric columns converted when a variable asks for them.

Rows are numbered in messages from 1, not counting the header row.
"""

from __future__ import annotations

import csv
import io
import itertools
import re

import numpy as np

from ppl.data.declaration import DataSpec, describe
from ppl.data.messages import cell_text
from ppl.data.sources import Source, parse_float
from ppl.errors import DataError


def _field_count(row: str | list[str]) -> int:
    """Fields in one CSV line (a plain string) or csv row; an empty line has none, like csv's."""
    if isinstance(row, str):
        return row.count(",") + 1 if row else 0
    return len(row)


#: Stan's largest int: a column index past it is no index (a plain, unknown column name)
INT_MAX = 2**31 - 1
_DOTTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\.[0-9]+)+)")
_BRACKET = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[\s*([0-9]+(?:\s*,\s*[0-9]+)*)\s*\]")
_MISSING_WORDS = {"na", "n/a", "null", "none", "nil", "missing", "."}


def split_column_name(name: str) -> tuple[str, tuple[int, ...]]:
    """``X.2.3`` or ``X[2,3]`` -> ("X", (2, 3)); anything else is a plain name."""
    m = _DOTTED.fullmatch(name)
    if m:
        idx = tuple(int(p) for p in m.group(2)[1:].split("."))
    else:
        m = _BRACKET.fullmatch(name)
        idx = tuple(int(p) for p in m.group(2).split(",")) if m else ()
    if m and all(1 <= i <= INT_MAX for i in idx):  # X.99999999999999999999: no index of Stan's
        return m.group(1), idx
    return name, ()


#: From this size a plain CSV's columns are read by pandas' C reader when pandas is installed
#: (8x numpy's casts; its import, ~0.3 s, pays off from here).
PANDAS_MIN_BYTES = 8 << 20
_WIDEST = 64  # wider cells are parsed as strings: no number needs more characters
_BLOCK_BYTES = 1 << 20  # the byte matrix of one block of rows


def _cast_spans(data: bytes, starts: np.ndarray, ends: np.ndarray, dtype) -> np.ndarray | None:
    """The cells data[starts[i]:ends[i]] cast to ``dtype`` by numpy (as float() / int() would
    parse them), or None if a cell does not parse or is wider than _WIDEST bytes. The cells are
    copied into a NUL-padded (rows, width) byte matrix a block of rows at a time."""
    lengths = ends - starts
    out = np.empty(len(lengths), dtype=dtype)
    if not len(lengths):
        return out
    width = int(lengths.max())
    if width > _WIDEST:
        return None
    width = max(width, 1)
    buf = np.frombuffer(data, dtype=np.uint8)
    offsets = np.arange(width)
    step = max(1, _BLOCK_BYTES // width)
    for i in range(0, len(lengths), step):
        index = starts[i : i + step, None] + offsets
        np.minimum(index, len(buf) - 1, out=index)
        cells = buf[index]
        cells[offsets >= lengths[i : i + step, None]] = 0
        try:
            out[i : i + step] = cells.view(f"S{width}").ravel().astype(dtype)
        except (ValueError, OverflowError, TypeError):
            return None
    return out


class CsvText:
    """A parsed CSV file: header, where each cell is, and lazily converted numeric columns.

    Plain files (no quotes, no lone carriage returns) are parsed from their bytes with numpy: the
    lines and fields are found once (an array of where each cell ends), and a column is turned
    into numbers only when a variable asks for it, a block of rows at a time, without a Python
    string per cell. Files that quote fields go through the csv module and keep their cells as
    strings. Either way a column is parsed exactly as float() / int() parse its cells, and a bad
    cell is reported with its row and column.
    """

    kind = "csv"

    def __init__(self, path: str, text: str | bytes, row0: int = 0) -> None:
        """`text`: the file's text, or its UTF-8 bytes without a BOM (as :func:`read_utf8`
        gives them); `row0`: rows of the file before this text (a chunk of a streamed file), for
        messages."""
        self.path, self.row0 = path, row0
        data = text.encode("utf-8") if isinstance(text, str) else text
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        self._ends: np.ndarray | None = None
        if b'"' in data or b"\r" in data:
            original = text if isinstance(text, str) else text.decode("utf-8")
            header, lines = self._split_with_csv(original)
            self._set_header(header)
            self._check_counts(np.fromiter(map(_field_count, lines), np.int64, len(lines)))
            # all cells, row after row: column j is cells[j::ncol]
            self.cells: list[str] = [c for row in lines for c in (row or [""])]
        else:  # no quoting: the fields are where the commas and line breaks are
            self._split_bytes(data)
        self._check_header()
        self._cache: dict[tuple[int, bool], np.ndarray] = {}
        self._pandas: dict[int, np.ndarray] | None = None

    def _set_header(self, header: list[str]) -> None:
        self.header = [c.strip() for c in header]
        self.ncol = len(self.header)

    def _check_counts(self, counts: np.ndarray) -> None:
        """Every data row must have the header's number of fields (an empty line has none)."""
        self.nrows = len(counts)
        if self.ncol == 1:  # a blank line in a one-column file is an empty cell
            counts[counts == 0] = 1
        bad = np.flatnonzero(counts != self.ncol)
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{self.path}: row {self.row0 + i + 1} has {counts[i]} "
                f"field{'s' if counts[i] != 1 else ''}, the header has {self.ncol}"
            )

    def _split_bytes(self, data: bytes) -> None:
        """Header, row count and cell ends of a CSV text that has no quotes and only \\n
        breaks. Blank lines before the header are skipped, blank lines at the end dropped."""
        pos = 0
        while True:  # the header: the first line with more than commas and blanks
            nl = data.find(b"\n", pos)
            stop = len(data) if nl < 0 else nl
            line = data[pos:stop].decode("utf-8")
            if line.replace(",", "").strip():
                break
            if nl < 0:
                raise DataError(f"{self.path}: the file is empty")
            pos = nl + 1
        self._set_header(line.split(","))
        start = len(data) if nl < 0 else nl + 1
        end = len(data)
        while end > start and data[end - 1] == 10:  # blank lines at the end of the file
            end -= 1
        self._data, self._start = data, start
        if end == start:
            self._check_counts(np.zeros(0, dtype=np.int64))
            self._ends = np.zeros((0, self.ncol), dtype=np.int64)
            return
        body = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
        seps = np.flatnonzero((body == 44) | (body == 10))  # commas and line breaks
        breaks = np.flatnonzero(body[seps] == 10)  # which separators end a line
        # fields per line: its separators, the line break included (the last line has none)
        counts = np.diff(np.concatenate(([-1], breaks, [len(seps)])))
        line_starts = np.concatenate(([0], seps[breaks] + 1))
        line_ends = np.concatenate((seps[breaks], [len(body)]))
        counts[line_starts == line_ends] = 0  # an empty line has no fields
        self._check_counts(counts)
        dtype = np.int32 if len(data) < 2**31 else np.int64
        ends = np.concatenate((seps, [len(body)])).astype(dtype) + dtype(start)
        self._ends = ends.reshape(self.nrows, self.ncol)

    def _split_with_csv(self, text: str) -> tuple[list[str], list[list[str]]]:
        """Header and data rows via the csv module, for files that use quoting or \\r breaks."""
        reader = csv.reader(io.StringIO(text, newline=""))
        header: list[str] | None = None
        rows: list[list[str]] = []
        try:
            for row in reader:
                if header is None:
                    if any(c.strip() for c in row):
                        header = row
                    continue
                rows.append(row)
        except csv.Error as e:
            raise DataError(f"{self.path}: line {reader.line_num}: malformed CSV: {e}") from None
        if header is None:
            raise DataError(f"{self.path}: the file is empty")
        while rows and not rows[-1]:  # blank lines at the end of the file
            rows.pop()
        return header, rows

    def _check_header(self) -> None:
        named = [c for c in self.header if c]
        if all(parse_float(c) is not None for c in named):
            shown = ", ".join(named[:4]) + (", ..." if len(named) > 4 else "")
            raise DataError(
                f"{self.path}: the first row must be a header naming the columns, "
                f"but it holds numbers ({shown})"
            )
        if len(self.header) == 1 and any(sep in self.header[0] for sep in ";\t|"):
            raise DataError(
                f'{self.path}: the header has a single column "{self.header[0][:60]}"; '
                "data CSV files must be comma-separated"
            )
        seen: dict[str, int] = {}
        self.vars: dict[str, dict[tuple[int, ...], int]] = {}
        for j, name in enumerate(self.header):
            if not name:  # e.g. R's unnamed row-name column: nothing can refer to it
                continue
            if name in seen:
                raise DataError(
                    f'{self.path}: column name "{name}" appears twice in the header '
                    f"(columns {seen[name] + 1} and {j + 1})"
                )
            seen[name] = j
            base, idx = split_column_name(name)
            cols = self.vars.setdefault(base, {})
            if idx in cols:
                raise DataError(
                    f'{self.path}: columns "{self.header[cols[idx]]}" and "{name}" both give '
                    f"{base}{''.join('.' + str(i) for i in idx)}"
                )
            cols[idx] = j

    def _cell_error(self, row: int, col: int, text: str) -> DataError:
        where = f'{self.path}: row {self.row0 + row + 1}, column "{self.header[col]}"'
        stripped = text.strip()
        if not stripped:
            return DataError(f"{where}: missing value (empty cell)")
        if stripped.lower() in _MISSING_WORDS:
            return DataError(f"{where}: missing value ({cell_text(stripped)})")
        return DataError(f"{where}: {cell_text(stripped)} is not a number")

    def column(self, col: int, want_int: bool) -> np.ndarray:
        """Column ``col`` as int64 (when asked and exact) or float64; vectorised when possible."""
        key = (col, want_int)
        if key not in self._cache:
            if self._ends is None:
                self._cache[key] = self._numbers(self.cells[col :: self.ncol], col, want_int)
            else:
                self._cache[key] = self._column_from_bytes(col, want_int)
        return self._cache[key]

    def _spans(self, col: int) -> tuple[np.ndarray, np.ndarray]:
        """Where the cells of column ``col`` start and end in the bytes (end exclusive)."""
        ends = self._ends[:, col].astype(np.int64)
        if col:
            starts = self._ends[:, col - 1].astype(np.int64) + 1
        else:
            starts = np.empty_like(ends)
            starts[:1] = self._start
            starts[1:] = self._ends[:-1, -1] + 1
        return starts, ends

    def _cells(self, col: int) -> list[str]:
        """The cells of column ``col`` as strings (for the exact, slow path)."""
        data = self._data
        starts, ends = self._spans(col)
        spans = zip(starts.tolist(), ends.tolist(), strict=True)
        return [data[a:b].decode("utf-8") for a, b in spans]

    def _column_from_bytes(self, col: int, want_int: bool) -> np.ndarray:
        """Numpy's string casts on blocks of the cells' bytes (float() / int() semantics);
        anything they refuse goes through :meth:`_numbers` on the decoded cells, which finds the
        bad cell or parses what only Python's float() accepts (e.g. non-ASCII digits). A large
        file's columns come from pandas' C reader first, when pandas is installed."""
        fast = self._by_pandas().get(col) if len(self._data) >= PANDAS_MIN_BYTES else None
        if fast is not None and (want_int or fast.dtype.kind == "f"):
            return fast
        if fast is not None and not (fast == 0).any():  # (a zero may have been "-0": -0.0)
            return fast.astype(np.float64)
        starts, ends = self._spans(col)
        if b"\x00" not in self._data:  # numpy's byte strings drop trailing NULs
            for dtype in (np.int64, np.float64) if want_int else (np.float64,):
                out = _cast_spans(self._data, starts, ends, dtype)
                if out is not None:
                    return out
        return self._numbers(self._cells(col), col, want_int)

    def _by_pandas(self) -> dict[int, np.ndarray]:
        """Every column pandas' C reader parses as int64 or float64 (exactly as float() and
        int() would: pandas >= 3 rounds correctly, older ones are asked to), by position; none
        when pandas is missing or reads the file differently (the numpy path then decides, and
        finds any bad cell with its row)."""
        if self._pandas is None:
            self._pandas = {}
            try:
                import pandas as pd
            except ImportError:
                return self._pandas
            major = int(pd.__version__.split(".")[0])
            exact = {} if major >= 3 else {"float_precision": "round_trip"}
            try:
                frame = pd.read_csv(io.BytesIO(self._data), header=0, na_filter=False,
                                    keep_default_na=False, engine="c", **exact)  # fmt: skip
            except Exception:  # noqa: BLE001 - any disagreement: the numpy path reads it
                return self._pandas
            if frame.shape == (self.nrows, self.ncol):
                for j in range(self.ncol):
                    column = frame.iloc[:, j].to_numpy()
                    if column.dtype.kind in "if":
                        self._pandas[j] = column.astype(np.int64 if column.dtype.kind == "i"
                                                        else np.float64, copy=False)  # fmt: skip
        return self._pandas

    def _numbers(self, cells: list[str], col: int, want_int: bool) -> np.ndarray:
        out: np.ndarray | None = None
        for dtype in (np.int64, np.float64) if want_int else (np.float64,):
            try:
                out = np.array(cells, dtype=dtype)
                break
            except (ValueError, OverflowError, TypeError):
                out = None
        if out is None:  # slow path: also finds the offending cell for the message
            out = np.empty(len(cells), dtype=np.float64)
            for i, c in enumerate(cells):
                v = parse_float(c)
                if v is None:
                    raise self._cell_error(i, col, c)
                out[i] = v
        return out

    def source_for(self, spec: DataSpec) -> Source | None:
        """The columns that give ``spec`` in this file, or None if the file does not mention it."""
        entry = self.vars.get(spec.name)
        if not entry or not spec.dims:
            return None
        arity = len(spec.dims) - 1
        cols = {t: j for t, j in entry.items() if len(t) == arity}
        if cols:
            return CsvSource(self, spec.name, cols)
        found = ", ".join(f'"{self.header[j]}"' for j in list(entry.values())[:4])
        if arity == 0:
            need = f'a single column "{spec.name}"'
        else:
            pattern = ".".join(["i", "j", "k", "l", "m"][:arity]) if arity <= 5 else "..."
            need = f"columns named {spec.name}.{pattern}"
        raise DataError(
            f"{self.path}: {describe(spec)} has {len(spec.dims)} dimension"
            f"{'s' if len(spec.dims) != 1 else ''}, so it needs {need}, but the file has {found}"
        )


class CsvSource(Source):
    """A variable's columns in a CSV file: ``x`` or ``X.1`` ... ``X.K``, a row per element."""

    def __init__(self, file: CsvText, name: str, cols: dict[tuple[int, ...], int]) -> None:
        self.file, self.name, self.cols, self.label = file, name, cols, file.path
        arity = len(next(iter(cols)))
        self.trailing = tuple(max(t[k] for t in cols) for k in range(arity))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.file.nrows, *self.trailing)

    def raw(self, want_int: bool) -> np.ndarray:
        if not self.trailing:
            return self.file.column(self.cols[()], want_int)
        keys = itertools.product(*(range(1, m + 1) for m in self.trailing))
        parts = [self.file.column(self.cols[k], want_int) for k in keys]
        return np.stack(parts, axis=1).reshape(self.shape)

    def where(self, index: tuple[int, ...]) -> str:
        key = tuple(i + 1 for i in index[1:])
        row = self.file.row0 + index[0] + 1
        return f'{self.label}: row {row}, column "{self.file.header[self.cols[key]]}"'

    def length_text(self, axis: int, n: int) -> str:
        if axis == 0:
            return f"{n} rows in {self.label}"
        return f"columns up to index {n} in dimension {axis + 1} in {self.label}"
